/**
 * The README's examples run: each file of examples/ runs with node and prints
 * what it should. That every fenced ts/js block of the README is one of these
 * files or marked `<!-- fragment -->` is checked by
 * tools/test/readme-examples.test.ts (see CONTRIBUTING.md).
 */
import { spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README examples', () => {
  it.each([
    ['use', 'manifest/0002.json\n'],
    ['prefixed', "[ 'wal/' ]\n"],
  ])('examples/%s.mjs runs with node and prints what it should', (name, expected) => {
    const result = spawnSync(
      process.execPath,
      ['--conditions=@x/source', join('examples', `${name}.mjs`)],
      { cwd: PACKAGE_ROOT, encoding: 'utf8' },
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(expected);
  });

  it('every file in examples/ is run here', async () => {
    const files = await readdir(join(PACKAGE_ROOT, 'examples'));
    expect(files.sort()).toEqual(['prefixed.mjs', 'use.mjs']);
  });
});
