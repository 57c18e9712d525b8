/**
 * The README's example runs with node and prints what it should (that the
 * README shows it verbatim is checked by tools/test/readme-examples.test.ts).
 * Only `low` and `normal` are run: `idle` depends on `chrt` being installed,
 * and lowering is one-way, so each run is a child process of its own.
 */
import { spawnSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

function runExample(name: string, env: Record<string, string> = {}) {
  return spawnSync(process.execPath, ['--conditions=@x/source', join('examples', name)], {
    cwd: PACKAGE_ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
}

describe('README examples', () => {
  it.each([
    ['low', 'running at low\n'],
    ['normal', 'running at normal\n'],
  ])('examples/use.mjs with MY_CPU_PRIORITY=%s prints what it applied', (setting, expected) => {
    const result = runExample('use.mjs', { MY_CPU_PRIORITY: setting });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(expected);
  });

  it('examples/use.mjs refuses a setting that is not a CPU priority', () => {
    const result = runExample('use.mjs', { MY_CPU_PRIORITY: 'fast' });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/not a CPU priority: fast/);
    expect(result.stdout).toBe('');
  });

  it('every file in examples/ is run here', async () => {
    expect((await readdir(join(PACKAGE_ROOT, 'examples'))).sort()).toEqual(['use.mjs']);
  });
});
