/**
 * The command runs its bundle only while the bundle is newer than every
 * file it was built from, and its sources otherwise; on a fresh install (CI)
 * the bundle is there, fresh, and says what the sources say.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/backupd.js', import.meta.url));

/** A repository of the same shape: the real bin, a fake bundle and fake sources that say which ran. */
function fakeRepository(): { root: string; input: string; bin: string } {
  const root = mkdtempSync(join(tmpdir(), 'backupd-bundle-'));
  const app = join(root, 'apps', 'backupd');
  for (const folder of ['bin', 'dist', 'src']) mkdirSync(join(app, folder), { recursive: true });
  const bin = join(app, 'bin', 'backupd.js');
  copyFileSync(BIN, bin);
  const main = (which: string) =>
    `export async function main(argv) { process.stdout.write('${which} ' + argv.join(' ')); return 0; }\n`;
  writeFileSync(join(app, 'src', 'main.ts'), main('sources'));
  const input = join(app, 'src', 'input.ts');
  writeFileSync(input, 'export {};\n');
  writeFileSync(join(app, 'dist', 'backupd.js'), main('bundle'));
  writeFileSync(
    join(app, 'dist', 'inputs.json'),
    JSON.stringify({ inputs: ['apps/backupd/src/main.ts', 'apps/backupd/src/input.ts'] }),
  );
  // Inputs an hour older than the bundle.
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const file of [join(app, 'src', 'main.ts'), input]) utimesSync(file, hourAgo, hourAgo);
  return { root, input, bin };
}

function run(bin: string, env: Record<string, string> = {}): string {
  const result = spawnSync(process.execPath, [bin, 'x'], {
    env: { ...process.env, BACKUPD_FROM_SOURCES: '', BACKUPD_DEBUG: '', ...env },
    encoding: 'utf8',
  });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

const repositories: string[] = [];
afterAll(() => {
  for (const root of repositories) rmSync(root, { recursive: true, force: true });
});

describe('bin/backupd.js', () => {
  it('runs the bundle while it is fresh, the sources once an input is newer, gone, or asked for', () => {
    const { root, input, bin } = fakeRepository();
    repositories.push(root);
    expect(run(bin)).toBe('bundle x');
    expect(run(bin, { BACKUPD_FROM_SOURCES: '1' })).toBe('sources x');
    const later = new Date(Date.now() + 60_000);
    utimesSync(input, later, later);
    expect(run(bin)).toBe('sources x');
    rmSync(input);
    expect(run(bin)).toBe('sources x');
  });

  it('loads the cloud adapters from their builds while those are fresh, else from their sources', () => {
    const { root, bin } = fakeRepository();
    repositories.push(root);
    const hourAgo = new Date(Date.now() - 3_600_000);
    const newest: string[] = [];
    for (const name of ['store', 'store-s3', 'store-azure', 'store-gcs']) {
      const pkg = join(root, 'packages', name);
      mkdirSync(join(pkg, 'src', 'nested'), { recursive: true });
      mkdirSync(join(pkg, 'dist'), { recursive: true });
      for (const file of ['src/index.ts', 'src/nested/part.ts']) {
        writeFileSync(join(pkg, file), 'export {};\n');
        utimesSync(join(pkg, file), hourAgo, hourAgo);
      }
      writeFileSync(join(pkg, 'dist', 'index.js'), 'export {};\n');
      newest.push(join(pkg, 'src', 'nested', 'part.ts'));
    }
    const said = () =>
      spawnSync(process.execPath, [bin, 'x'], {
        env: { ...process.env, BACKUPD_FROM_SOURCES: '', BACKUPD_DEBUG: '1' },
        encoding: 'utf8',
      }).stderr;
    expect(said()).toContain('running from the bundle, cloud adapters from their builds');
    // One source file of one adapter edited after its build.
    utimesSync(newest[2]!, new Date(), new Date(Date.now() + 60_000));
    expect(said()).toContain('running from the bundle, cloud adapters from their sources');
    // The sources of everything when the bundle is stale.
    expect(
      spawnSync(process.execPath, [bin, 'x'], {
        env: { ...process.env, BACKUPD_FROM_SOURCES: '1', BACKUPD_DEBUG: '1' },
        encoding: 'utf8',
      }).stderr,
    ).toContain('running from the sources, cloud adapters from their sources');
  });

  it('runs the sources when there is no bundle or no list of its inputs', () => {
    const { root, bin } = fakeRepository();
    repositories.push(root);
    rmSync(join(root, 'apps', 'backupd', 'dist', 'inputs.json'));
    expect(run(bin)).toBe('sources x');
    rmSync(join(root, 'apps', 'backupd', 'dist'), { recursive: true });
    expect(run(bin)).toBe('sources x');
  });

  it('installed (no sources beside it) runs the bundle, without looking at inputs', () => {
    const { root, input, bin } = fakeRepository();
    repositories.push(root);
    rmSync(join(root, 'apps', 'backupd', 'src'), { recursive: true });
    expect(run(bin)).toBe('bundle x');
    expect(input).toBeDefined();
    rmSync(join(root, 'apps', 'backupd', 'dist', 'inputs.json'));
    expect(run(bin)).toBe('bundle x');
  });

  // Only a fresh install can promise a fresh bundle: a checkout being edited runs its sources.
  it.runIf(process.env.CI === 'true')(
    'after pnpm install the real bundle is fresh and says what the sources say',
    () => {
      const probe = spawnSync(process.execPath, [BIN, '--help'], {
        env: { ...process.env, BACKUPD_DEBUG: '1', BACKUPD_FROM_SOURCES: '' },
        encoding: 'utf8',
      });
      expect(probe.stderr).toContain('running from the bundle');
      const sources = spawnSync(process.execPath, [BIN, '--help'], {
        env: { ...process.env, BACKUPD_FROM_SOURCES: '1' },
        encoding: 'utf8',
      });
      expect(probe.stdout).toBe(sources.stdout);
      expect(probe.stdout).toContain('replicate');
    },
  );
});
