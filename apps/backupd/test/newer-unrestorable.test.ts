/**
 * Restore tells the truth: when the backup holds shipped data newer than the
 * restore point a restore of the latest used (segments or a snapshot no
 * manifest names yet, as a heavy writer leaves them between restore points),
 * `backupd restore` still restores and exits 0, but says so on stderr and in
 * `--json`; `backupd ls` says so after its table and on the LATEST entry of
 * its `--json`.
 *
 * One real backup is made with `replicate --exec` on a file:// prefix (its
 * graceful stop writes a final restore point, so nothing is newer); each test
 * works on its own copy, with the "newer" objects written into it with FsStore.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { parseLatest, parseManifest, parseSegmentKey, segmentKey, snapshotKey } from '@x/manifest';
import { FsStore } from '@x/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli } from './helpers/cli.ts';

/** The prefix a file:// URL's objects live under. */
const PREFIX = 'backup';

const directory = mkdtempSync(join(tmpdir(), 'backupd-newer-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

const env = baseEnv({
  BACKUPD_INTERVAL: '200ms',
  BACKUPD_LEASE_TTL: '3s',
  BACKUPD_RESTORE_POINT_INTERVAL: '200ms',
});

/** The application: inserts 20 rows, then exits. */
function application(database: string): string {
  const source = `const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(${JSON.stringify(database)});
db.exec("PRAGMA busy_timeout = 10000");
for (let i = 0; i < 20; i++) db.exec('INSERT INTO t VALUES (' + i + ')');
db.close();
setTimeout(() => process.exit(0), 300);`;
  const encoded = Buffer.from(source, 'utf8').toString('base64');
  return `${JSON.stringify(process.execPath)} -e "eval(Buffer.from('${encoded}', 'base64').toString())"`;
}

function rowCount(database: string): number {
  const db = new DatabaseSync(database, { readOnly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

interface Backup {
  readonly root: string;
  readonly url: string;
  readonly store: FsStore;
}

/** What LATEST's restore point is: its commit, generation and where its WAL ends. */
interface LatestPoint {
  readonly commitSeq: number;
  readonly walGeneration: number;
  readonly walEnd: number;
}

interface NewerUnrestorable {
  readonly segments: number;
  readonly snapshots: number;
  readonly bytes: number;
  readonly firstKey: string;
  readonly lastKey: string;
  readonly restorePointCommitSeq: number;
  readonly newerRestorePoints: number;
}

interface ListedPoint {
  readonly latest: boolean;
  readonly commitSeq: number;
  readonly newerUnrestorable?: NewerUnrestorable | null;
}

let original: string;
let latest: LatestPoint;
let copies = 0;

/** A fresh copy of the original backup, for one test to change. */
function backupCopy(): Backup {
  copies += 1;
  const root = join(directory, `copy-${copies}`);
  cpSync(original, root, { recursive: true });
  return { root, url: pathToFileURL(root).href, store: new FsStore({ root }) };
}

async function readLatestPoint(store: FsStore): Promise<LatestPoint> {
  const latestObject = await store.get(`${PREFIX}/LATEST`);
  if (latestObject === null) throw new Error('the backup has no LATEST');
  const key = parseLatest(latestObject.body, { prefix: PREFIX });
  const manifestObject = await store.get(key);
  if (manifestObject === null) throw new Error(`LATEST names ${key}, which is missing`);
  const manifest = parseManifest(manifestObject.body, { prefix: PREFIX });
  const last = manifest.segments.at(-1);
  return {
    commitSeq: manifest.commitSeq,
    walGeneration: manifest.walGeneration,
    walEnd: last === undefined ? 0 : (parseSegmentKey(PREFIX, last.key)?.end ?? 0),
  };
}

/** Writes `size` bytes at `key`, as the worker would have shipped them. */
async function plant(backup: Backup, key: string, size: number): Promise<void> {
  await backup.store.put(key, new Uint8Array(size).fill(0x5a));
}

describe('restore and ls report shipped data newer than the restore point used', () => {
  beforeAll(async () => {
    const database = join(directory, 'app.db');
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    db.close();
    original = join(directory, 'original-backups');
    const replicated = await runCli(
      ['replicate', database, pathToFileURL(original).href, '--exec', application(database)],
      { env, timeoutMs: 60_000 },
    );
    expect(replicated.code, replicated.stderr).toBe(0);
    latest = await readLatestPoint(new FsStore({ root: original }));
  }, 90_000);

  it('restore of the latest warns on stderr about a segment shipped after its restore point, says so in --json, and still restores with exit 0', async () => {
    const backup = backupCopy();
    const newer = segmentKey(PREFIX, latest.walGeneration, latest.walEnd, latest.walEnd + 300);
    await plant(backup, newer, 300);

    const target = join(backup.root, '..', `restored-${copies}.db`);
    const text = await runCli(['restore', backup.url, target], { env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toContain(
      `warning: the backup holds 1 newer segment(s) (300 bytes) shipped after the restore point used (commit ${latest.commitSeq}); they are in no restore point and were not restored`,
    );
    expect(rowCount(target)).toBe(20);

    const json = await runCli(['restore', backup.url, `${target}-json.db`, '--json'], { env });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toContain('warning: the backup holds 1 newer segment(s) (300 bytes)');
    const result = JSON.parse(json.stdout) as {
      commitSeq: number;
      newerUnrestorable: NewerUnrestorable | null;
    };
    expect(result.commitSeq).toBe(latest.commitSeq);
    expect(result.newerUnrestorable).toMatchObject({
      segments: 1,
      snapshots: 0,
      bytes: 300,
      firstKey: newer,
      lastKey: newer,
      restorePointCommitSeq: latest.commitSeq,
      newerRestorePoints: 0,
    });
  });

  it('restore of the latest counts a snapshot and segments of a later generation', async () => {
    const backup = backupCopy();
    const next = latest.walGeneration + 1;
    await plant(backup, snapshotKey(PREFIX, next, 0), 4096);
    await plant(backup, segmentKey(PREFIX, next, 0, 1000), 1000);
    await plant(backup, segmentKey(PREFIX, next, 1000, 1500), 500);

    const result = await runCli(
      ['restore', backup.url, join(backup.root, '..', `restored-${copies}.db`), '--json'],
      { env },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      `warning: the backup holds 2 newer segment(s) and 1 newer snapshot(s) (5596 bytes) shipped after the restore point used (commit ${latest.commitSeq})`,
    );
    expect(
      (JSON.parse(result.stdout) as { newerUnrestorable: unknown }).newerUnrestorable,
    ).toMatchObject({
      segments: 2,
      snapshots: 1,
      bytes: 5596,
      firstKey: snapshotKey(PREFIX, next, 0),
      lastKey: segmentKey(PREFIX, next, 1000, 1500),
    });
  });

  it('ls shows a line after the table and the field on the LATEST entry of --json', async () => {
    const backup = backupCopy();
    await plant(
      backup,
      segmentKey(PREFIX, latest.walGeneration, latest.walEnd, latest.walEnd + 64),
      64,
    );
    await plant(
      backup,
      segmentKey(PREFIX, latest.walGeneration, latest.walEnd + 64, latest.walEnd + 96),
      32,
    );

    const text = await runCli(['ls', backup.url], { env });
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^LATEST\s+COMMITS/);
    expect(lines.at(-1)).toBe(
      `NEWER DATA: 2 newer segment(s) (96 bytes) shipped after LATEST's restore point (commit ${latest.commitSeq}); they are in no restore point; a restore of the latest leaves them out`,
    );

    const json = await runCli(['ls', backup.url, '--json'], { env });
    expect(json.code, json.stderr).toBe(0);
    const points = JSON.parse(json.stdout) as ListedPoint[];
    const latestEntries = points.filter((point) => point.latest);
    expect(latestEntries).toHaveLength(1);
    expect(latestEntries[0]!.newerUnrestorable).toMatchObject({
      segments: 2,
      snapshots: 0,
      bytes: 96,
      restorePointCommitSeq: latest.commitSeq,
    });
    // Only LATEST's entry carries it: older restore points are older by choice.
    for (const point of points.filter((entry) => !entry.latest)) {
      expect(point).not.toHaveProperty('newerUnrestorable');
    }
  });

  it('a backup with nothing newer (only unparseable keys beside it): no warning, no line, and null in --json', async () => {
    const backup = backupCopy();
    const generation = String(latest.walGeneration).padStart(20, '0');
    await plant(backup, `${PREFIX}/wal/not-a-generation/00000000000000000000-1.segment`, 10);
    await plant(backup, `${PREFIX}/wal/${generation}/99999999999999999999-x.segment`, 10);
    await plant(backup, `${PREFIX}/wal/${generation}/nested/junk`, 10);
    await plant(backup, `${PREFIX}/snapshots/garbage`, 10);

    const restored = await runCli(
      ['restore', backup.url, join(backup.root, '..', `restored-${copies}.db`), '--json'],
      { env },
    );
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stderr).not.toContain('warning');
    const result = JSON.parse(restored.stdout) as Record<string, unknown>;
    expect(result).toHaveProperty('newerUnrestorable', null);

    const text = await runCli(['ls', backup.url], { env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).not.toContain('NEWER DATA');
    const json = await runCli(['ls', backup.url, '--json'], { env });
    const latestEntry = (JSON.parse(json.stdout) as ListedPoint[]).find((point) => point.latest);
    expect(latestEntry).toHaveProperty('newerUnrestorable', null);
  });

  it('restore of a chosen commit neither warns nor adds the field: it leaves newer data out on purpose', async () => {
    const backup = backupCopy();
    await plant(
      backup,
      segmentKey(PREFIX, latest.walGeneration, latest.walEnd, latest.walEnd + 300),
      300,
    );
    const result = await runCli(
      [
        'restore',
        backup.url,
        join(backup.root, '..', `restored-${copies}.db`),
        '--commit',
        String(latest.commitSeq),
        '--json',
      ],
      { env },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('warning');
    expect(JSON.parse(result.stdout)).not.toHaveProperty('newerUnrestorable');
  });
});
