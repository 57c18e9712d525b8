/**
 * A database that backupd 0.2 backed up, with the six files 0.2 kept beside
 * it (`app.db-backupd.lineage`, `.state`, `.resume`, `.parent`, `.lock`,
 * `.json`; fixture sidecars-0.2, see fixtures/README.md), started under
 * this release: the files move into `.app.db-backupd/` and keep their
 * meaning. The lineage continues (no new lineage), the resume record lets
 * the generation continue (no new snapshot), the instance id is kept, and
 * the backup restores to the database.
 */
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, suiteWorkspace, waitFor } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import { bucketFiles, snapshots } from './helpers/restart-bucket.ts';

const FIXTURE = new URL('./fixtures/sidecars-0.2/', import.meta.url);
const LEGACY = ['lineage', 'state', 'resume', 'parent', 'lock', 'json'].map(
  (suffix) => `app.db-backupd.${suffix}`,
);

describe('sidecar files of release 0.2', () => {
  const { directory, running } = suiteWorkspace('sidecar-move');

  it('move into .app.db-backupd/ on the first start and keep their meaning', async () => {
    cpSync(FIXTURE, directory, { recursive: true });
    expect(
      readdirSync(directory)
        .filter((name) => name.startsWith('app.db-backupd.'))
        .sort(),
    ).toEqual([...LEGACY].sort());
    const holderFile = join(directory, 'app.db-backupd.json');
    const holder = JSON.parse(readFileSync(holderFile, 'utf8')) as {
      instanceId: string;
      host: string;
    };
    // The instance id is kept only under the host name that wrote it.
    writeFileSync(holderFile, JSON.stringify({ ...holder, host: hostname() }));
    const lineage = readFileSync(join(directory, 'app.db-backupd.lineage'), 'utf8');
    const bucket = join(directory, 'bk');
    const before = snapshots(bucketFiles(bucket));

    const database = join(directory, 'app.db');
    const url = pathToFileURL(bucket).href;
    // The fixture's generation began when the fixture was made; without this
    // the daily schedule would start a new one once that is a day ago.
    const env = baseEnv({
      BACKUPD_RESTORE_POINT_INTERVAL: '200ms',
      BACKUPD_SNAPSHOT_INTERVAL: '0s',
    });
    const backupd = startBackupd(['replicate', database, url, '--log-format', 'json'], { env });
    running.push(backupd);
    await waitFor(
      'the generation to continue',
      () => backupd.logEvents().some((e) => e.event === 'backup.generation_continued') || undefined,
      { describe: () => backupd.describe(), timeoutMs: 30_000 },
    );
    expect(await backupd.stop('SIGTERM', 60_000), backupd.describe()).toEqual({
      code: 0,
      signal: null,
    });

    const events = backupd.logEvents();
    expect(events.find((e) => e.event === 'backupd.database_locked')).toMatchObject({
      instanceId: holder.instanceId,
      instanceIdKept: true,
    });
    expect(events.some((e) => e.event === 'backup.new_lineage')).toBe(false);
    expect(snapshots(bucketFiles(bucket))).toEqual(before);
    for (const name of LEGACY) expect(existsSync(join(directory, name)), name).toBe(false);
    const sidecars = join(directory, '.app.db-backupd');
    expect(readdirSync(sidecars).sort()).toEqual(
      ['holder.json', 'lineage', 'lock', 'parent', 'resume', 'state'].sort(),
    );
    expect(readFileSync(join(sidecars, 'lineage'), 'utf8')).toBe(lineage);

    const target = join(directory, 'restored', 'app.db');
    const restored = await runCli(['restore', url, target], { env });
    expect(restored.code, restored.stderr).toBe(0);
    expect(databaseHash(target)).toBe(databaseHash(database));
  }, 120_000);
});
