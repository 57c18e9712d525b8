/**
 * The README's examples run with node and print what they should (that the
 * README shows each one verbatim is checked by
 * tools/test/readme-examples.test.ts; see CONTRIBUTING.md).
 */
import { spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README examples', () => {
  it.each([['use', "backed up: commit 3\nrestored: commit 2\n[ 'one', 'two' ]\n"]])(
    'examples/%s.mjs runs with node and prints what it should',
    (name, expected) => {
      const result = spawnSync(
        process.execPath,
        ['--conditions=@x/source', join('examples', `${name}.mjs`)],
        { cwd: PACKAGE_ROOT, encoding: 'utf8' },
      );
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toBe(expected);
    },
  );

  it('every file in examples/ is run here', async () => {
    expect((await readdir(join(PACKAGE_ROOT, 'examples'))).sort()).toEqual(['use.mjs']);
  });
});
