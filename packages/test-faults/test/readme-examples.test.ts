/**
 * The README's example runs with node and prints what it should (that the
 * README shows it verbatim is checked by tools/test/readme-examples.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('README examples', () => {
  it('examples/faulty-store.mjs fails the same put on every run', () => {
    for (let run = 0; run < 2; run++) {
      const result = spawnSync(
        process.execPath,
        ['--conditions=@x/source', join('examples', 'faulty-store.mjs')],
        { cwd: PACKAGE_ROOT, encoding: 'utf8' },
      );
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toBe('k4: error503\ntrue\n');
    }
  });

  it('every file in examples/ is run here', async () => {
    expect((await readdir(join(PACKAGE_ROOT, 'examples'))).sort()).toEqual(['faulty-store.mjs']);
  });
});
