/**
 * The README's example runs with node and prints what it should (that the
 * README shows it verbatim is checked by tools/test/readme-examples.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README examples', () => {
  it('examples/use.mjs encrypts and decrypts a message', () => {
    const run = spawnSync(process.execPath, ['--conditions=@x/source', 'examples/use.mjs'], {
      cwd: PACKAGE_ROOT,
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('page bytes\n');
  });
});
