/**
 * The README rules of CONTRIBUTING.md hold for every package and app: each
 * fenced ts/js block is a file of the package's examples/ (which its own
 * tests run) or marked `<!-- fragment -->`; a published package's README
 * opens with Install and the Node it needs. The checker is also shown to
 * fail on a README that breaks them.
 */

import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { codeBlocks, readmeProblems } from '../src/readme-blocks.ts';

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url));

function readmes(group: 'packages' | 'apps'): string[] {
  return readdirSync(join(repositoryRoot, group), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => `${group}/${entry.name}`)
    .sort();
}

describe('README examples of the repository', () => {
  const packages = readmes('packages');
  const apps = readmes('apps');

  it('finds the packages and apps', () => {
    expect(packages).toContain('packages/store');
    expect(apps).toContain('apps/backupd');
  });

  it('every ts/js block is an examples/ file or a fragment; published READMEs open with Install', () => {
    const problems = [
      ...packages.flatMap((name) => readmeProblems(join(repositoryRoot, name), name, 'package')),
      ...apps.flatMap((name) => readmeProblems(join(repositoryRoot, name), name, 'app')),
    ];
    expect(problems).toEqual([]);
  });
});

describe('the README checker', () => {
  const made: string[] = [];
  afterAll(async () => {
    for (const directory of made) await rm(directory, { recursive: true, force: true });
  });

  async function fakePackage(readme: string, examples: Record<string, string>): Promise<string> {
    const directory = await mkdtemp(join(tmpdir(), 'readme-check-'));
    made.push(directory);
    await writeFile(join(directory, 'package.json'), JSON.stringify({ name: '@x/fake' }));
    await writeFile(join(directory, 'README.md'), readme);
    await mkdir(join(directory, 'examples'));
    for (const [file, text] of Object.entries(examples)) {
      await writeFile(join(directory, 'examples', file), text);
    }
    return directory;
  }

  const install = '# @x/fake\n\n## Install\n\n```sh\npnpm add @x/fake\n```\n\nNode 22 or newer.\n';

  it('fails on an unmarked block that matches no example, naming the README and line', async () => {
    const readme = `${install}\n## Use\n\n\`\`\`ts\nconsole.log('not an example');\n\`\`\`\n`;
    const directory = await fakePackage(readme, { 'use.mjs': "console.log('an example');\n" });
    expect(readmeProblems(directory, 'packages/fake', 'package')).toEqual([
      'packages/fake/README.md:13: ```ts block is neither a file of examples/ nor marked <!-- fragment -->',
    ]);
  });

  it('passes a block that is an example verbatim (indented too) and a marked fragment', async () => {
    const readme = [
      install,
      '## Use',
      '',
      '1. Run it:',
      '',
      '   ```js',
      "   console.log('an example');",
      '   ```',
      '',
      '<!-- fragment -->',
      '',
      '```typescript',
      'await somethingElse();',
      '```',
      '',
    ].join('\n');
    const directory = await fakePackage(readme, { 'use.mjs': "console.log('an example');\n" });
    expect(codeBlocks(readme).map((block) => block.fragment)).toEqual([false, true]);
    expect(readmeProblems(directory, 'packages/fake', 'package')).toEqual([]);
  });

  it('fails a published README that does not open with Install and Node 22 or newer', async () => {
    const directory = await fakePackage('# @x/fake\n\n## Use\n\nNode 20.\n', {});
    expect(readmeProblems(directory, 'packages/fake', 'package')).toEqual([
      'packages/fake/README.md: first section is not Install',
      'packages/fake/README.md: Install section does not say "Node 22 or newer"',
    ]);
  });

  it('fails on a fence that never closes', () => {
    expect(() => codeBlocks('text\n```ts\nopen\n')).toThrow(/line 2: unclosed fence/);
  });
});
