/**
 * What the published package holds (`npm pack`'s file list: the bin, the
 * bundle, package.json, the README; no sources) runs on its own, outside the
 * repository, with nothing installed beside it: `--help`, `--version`, and a
 * backup and a restore on the embedded default (a local directory). The
 * cloud adapters are its only dependencies, loaded for their schemes alone.
 * Needs the bundle `pnpm install` builds (under CI=true it must be there).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const APP = fileURLToPath(new URL('..', import.meta.url));
const haveBundle = existsSync(join(APP, 'dist', 'backupd.js'));
const inCi = process.env.CI === 'true';
const directory = mkdtempSync(join(tmpdir(), 'backupd-installed-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** The files `npm pack` would put in the package (scripts not run). */
function packedFiles(): string[] {
  const output = execFileSync('npm', ['pack', '--dry-run', '--ignore-scripts', '--json'], {
    cwd: APP,
    encoding: 'utf8',
    env: { ...process.env, npm_config_loglevel: 'silent' },
  });
  const [pack] = JSON.parse(output) as { files: { path: string }[] }[];
  return pack!.files.map((file) => file.path).sort();
}

describe('the published package', () => {
  it('holds the bin, the bundle, package.json and the README, and no sources', () => {
    const files = packedFiles();
    expect(files).toEqual([
      'README.md',
      'bin/backupd.js',
      'dist/backupd.js',
      'dist/inputs.json',
      'package.json',
    ]);
    const manifest = JSON.parse(readFileSync(join(APP, 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      dependencies: Record<string, string>;
      private?: boolean;
    };
    expect(manifest.private).toBeUndefined();
    expect(manifest.bin).toEqual({ backupd: './bin/backupd.js' });
    // Everything else is in the bundle.
    expect(Object.keys(manifest.dependencies).sort()).toEqual([
      '@x/store-azure',
      '@x/store-gcs',
      '@x/store-s3',
    ]);
  });

  it.runIf(haveBundle || inCi)(
    'runs from an install with nothing beside it: help, version, a backup and a restore',
    () => {
      const installed = join(directory, 'node_modules', 'backupd');
      for (const file of packedFiles()) {
        mkdirSync(dirname(join(installed, file)), { recursive: true });
        cpSync(join(APP, file), join(installed, file));
      }
      const bin = join(installed, 'bin', 'backupd.js');
      const run = (...args: string[]) =>
        spawnSync(process.execPath, [bin, ...args], {
          cwd: directory,
          encoding: 'utf8',
          env: { PATH: process.env.PATH, BACKUPD_DEBUG: '1' },
          timeout: 60_000,
        });
      const help = run('--help');
      expect(help.status, help.stderr).toBe(0);
      expect(help.stderr).toContain('running from the bundle');
      expect(help.stdout).toContain('replicate');
      const version = JSON.parse(readFileSync(join(APP, 'package.json'), 'utf8')).version;
      expect(run('--version').stdout).toBe(`backupd ${version}\n`);

      const database = join(directory, 'app.db');
      const db = new DatabaseSync(database);
      db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (42);');
      db.close();
      const backups = pathToFileURL(join(directory, 'backups')).href;
      // Backs up until the application (here: one that exits at once) is done.
      const replicate = run(
        'replicate',
        database,
        backups,
        '--exec',
        `${JSON.stringify(process.execPath)} -e "process.exit(0)"`,
      );
      expect(replicate.status, replicate.stderr).toBe(0);
      const restored = join(directory, 'restored.db');
      const restore = run('restore', backups, restored);
      expect(restore.status, restore.stderr).toBe(0);
      const check = new DatabaseSync(restored, { readOnly: true });
      try {
        expect(check.prepare('SELECT x FROM t').all()).toEqual([{ x: 42 }]);
      } finally {
        check.close();
      }
    },
    90_000,
  );
});
