/**
 * The README's examples run: every fenced ts/js block is either a file of
 * examples/ (run by examples.test.ts), character for character, or marked
 * `<!-- fragment -->` on the line before its fence (see CONTRIBUTING.md).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const CODE = new Set(['ts', 'typescript', 'js', 'javascript', 'mjs']);

interface Block {
  readonly line: number;
  readonly code: string;
  readonly fragment: boolean;
}

function codeBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[index]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const end = lines.findIndex((line, at) => at > index && /^\s*```\s*$/.test(line));
    if (end < 0) throw new Error(`README line ${index + 1}: unclosed fence`);
    if (CODE.has(open[2]!)) {
      const previous = lines
        .slice(0, index)
        .reverse()
        .find((line) => line.trim() !== '');
      blocks.push({
        line: index + 1,
        code: `${lines
          .slice(index + 1, end)
          .map((line) => line.slice(indent))
          .join('\n')}\n`,
        fragment: previous?.trim() === '<!-- fragment -->',
      });
    }
    index = end;
  }
  return blocks;
}

describe('README examples', () => {
  it('each ts/js block is an example file or marked as a fragment', async () => {
    const readme = await readFile(join(PACKAGE_ROOT, 'README.md'), 'utf8');
    const dir = join(PACKAGE_ROOT, 'examples');
    const files = (await readdir(dir)).filter((file) => /\.(mjs|js|ts)$/.test(file));
    const examples = await Promise.all(files.map((file) => readFile(join(dir, file), 'utf8')));
    const blocks = codeBlocks(readme);
    expect(blocks.length).toBeGreaterThan(0);
    const stray = blocks
      .filter((block) => !block.fragment && !examples.includes(block.code))
      .map((block) => `line ${block.line}`);
    expect(stray, 'blocks neither an examples/ file nor marked <!-- fragment -->').toEqual([]);
  });

  it('opens with how to install it and which Node it needs', async () => {
    const readme = await readFile(join(PACKAGE_ROOT, 'README.md'), 'utf8');
    const firstSection = readme.split(/\n## /)[1] ?? '';
    expect(firstSection).toMatch(/^Install/);
    expect(firstSection).toMatch(/Node 22 or newer/);
  });
});
