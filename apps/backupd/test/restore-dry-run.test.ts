/**
 * `backupd restore --dry-run` prints the plan of the restore the options
 * choose (the restore point, the commit it lands on, its time when known,
 * every object with its size, the bytes) and writes nothing; the restore
 * that follows lands where the plan said. Prefix: the `healthy-prefix`
 * fixture (restore points at commits 5, 43, 60 and 78).
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { latestKey, parseLatest, parseManifest } from '@x/manifest';
import type { RestorePlan } from '@x/restore';
import { FsStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli } from './helpers/cli.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/healthy-prefix/', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'restore-dry-run-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const env = baseEnv();

type PlanJson = RestorePlan & { dryRun: true; target: string; targetExists: boolean };

function prefixCopy(): string {
  const directory = mkdtempSync(join(root, 'prefix-'));
  cpSync(FIXTURE, directory, { recursive: true });
  return directory;
}

const cli = (args: readonly string[]) => runCli(args, { env, timeoutMs: 60_000 });

describe('backupd restore --dry-run', () => {
  it('prints the latest restore point, its objects and bytes, and writes nothing', async () => {
    const bucket = prefixCopy();
    const url = `file://${bucket}`;
    const out = mkdtempSync(join(root, 'out-'));
    const target = join(out, 'app.db');
    const text = await cli(['restore', url, target, '--dry-run']);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`dry run: a restore to ${target} would land on commit 78`);
    expect(text.stdout).toContain('restore point: backup/manifest/00000000000000000078.json');
    expect(text.stdout).toContain('nothing was written (--dry-run)');
    expect(readdirSync(out)).toEqual([]);

    const json = await cli(['restore', url, target, '--dry-run', '--json']);
    expect(json.code).toBe(0);
    const plan = JSON.parse(json.stdout) as PlanJson;
    // The objects are exactly those the manifest names, with their sizes.
    const store = new FsStore({ root: bucket });
    const manifestKey = parseLatest((await store.get(latestKey('backup')))!.body, {
      prefix: 'backup',
    });
    const manifest = parseManifest((await store.get(manifestKey))!.body, { prefix: 'backup' });
    expect(plan).toMatchObject({
      dryRun: true,
      targetExists: false,
      manifestKey,
      commitSeq: manifest.commitSeq,
      commitTime: manifest.commitTime,
    });
    expect(plan.objects.map((o) => [o.key, o.size])).toEqual(
      [...manifest.files, ...manifest.segments].map((o) => [o.key, o.size]),
    );
    expect(plan.bytes).toBe(plan.objects.reduce((sum, o) => sum + o.size, 0));
    expect(plan.objects[0]!.file).toBe('app.db-backupd.snapshot');
    expect(readdirSync(out)).toEqual([]);

    // The restore lands where the plan said.
    const restored = await cli(['restore', url, target, '--json']);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({
      commitSeq: plan.commitSeq,
      manifestKey: plan.manifestKey,
    });
    const again = await cli(['restore', url, target, '--dry-run']);
    expect(again.stdout).toContain('exists: the restore would refuse it without --force');
  });

  it('plans a commit and a time as the restore chooses them', async () => {
    const url = `file://${prefixCopy()}`;
    const target = join(mkdtempSync(join(root, 'out-')), 'app.db');
    const byCommit = JSON.parse(
      (await cli(['restore', url, target, '--commit', '50', '--dry-run', '--json'])).stdout,
    ) as PlanJson;
    expect(byCommit.commitSeq).toBe(50);
    expect(byCommit.restorableFrom).toBeLessThanOrEqual(50);
    expect(byCommit.commitTime).toBeNull();
    const restored = await cli(['restore', url, target, '--commit', '50', '--json']);
    expect(JSON.parse(restored.stdout)).toMatchObject({
      commitSeq: 50,
      manifestKey: byCommit.manifestKey,
    });
    rmSync(target);

    const byTime = JSON.parse(
      (await cli(['restore', url, target, '--time', '2099-01-01T00:00:00Z', '--dry-run', '--json']))
        .stdout,
    ) as PlanJson;
    expect(byTime.commitSeq).toBe(78);
    expect(byTime.commitTime).not.toBeNull();
    expect(existsSync(target)).toBe(false);
  });
});
