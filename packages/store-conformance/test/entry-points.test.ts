/**
 * What each entry point loads. The main entry is what `backupd check` and
 * `backupd lease` import at run time (the probe), so it must never load
 * vitest — also not when `VITEST` happens to be set in the environment; only
 * `@x/store-conformance/vitest` may.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

// Refuses every resolution of `vitest` (or a subpath), then imports `entry`
// and prints its export names.
const importWithoutVitest = (entry: string) => `
import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === 'vitest' || specifier.startsWith('vitest/') || specifier.startsWith('@vitest/'))
      throw new Error('vitest was loaded by ' + context.parentURL);
    return nextResolve(specifier, context);
  },
});
const loaded = await import(${JSON.stringify(entry)});
console.log(JSON.stringify(Object.keys(loaded).sort()));
`;

function runNode(source: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(
    process.execPath,
    ['--conditions=@x/source', '--input-type=module', '--eval', source],
    // VITEST set on purpose: the old entry loaded vitest whenever it was.
    { cwd: PACKAGE_ROOT, env: { ...process.env, VITEST: 'true' }, encoding: 'utf8' },
  );
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('entry points', () => {
  it('the main entry loads without vitest, even with VITEST set, and has the probe and the runner but not describeStoreConformance', () => {
    const result = runNode(importWithoutVitest('@x/store-conformance'));
    expect(result.stderr).not.toMatch(/vitest was loaded/);
    expect(result.status).toBe(0);
    const names = JSON.parse(result.stdout) as string[];
    expect(names).toContain('probeConditionalWrites');
    expect(names).toContain('runConformanceCases');
    expect(names).not.toContain('describeStoreConformance');
  });

  it('the check that vitest is refused works: the vitest entry is refused by it', () => {
    // Without this, the test above could pass because the hook never fires.
    const result = runNode(importWithoutVitest('@x/store-conformance/vitest'));
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/vitest was loaded by .*describe\.ts/);
  });

  it('@x/store-conformance/vitest exports describeStoreConformance', async () => {
    const vitestEntry = await import('@x/store-conformance/vitest');
    expect(typeof vitestEntry.describeStoreConformance).toBe('function');
  });
});
