/**
 * The whole product through its command line, as an operator runs it: a live
 * SQLite database written by another process, `backupd replicate` shipping it
 * to an S3 server (versitygw), killed with SIGKILL and restarted mid-run, then
 * `ls`, `verify --deep` and `restore` (latest and a chosen commit), each
 * restored database compared with what the application recorded after each
 * of its commits.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseLatest, parseSegmentKey } from '@x/manifest';
import { sqliteContentHash as contentHash } from '@x/source-sqlite';
import { randomPrefix } from '@x/test-servers';
import { describe, expect, test } from 'vitest';
import {
  runCli,
  s3Env,
  s3Url,
  startBackupd,
  startWriter,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { directStore, missingReason, s3Server } from './helpers/servers.ts';

interface WriterRecord {
  readonly commit: number;
  readonly hash: string;
}

interface ListedPoint {
  readonly manifestKey: string;
  readonly commitSeq: number;
  readonly restorableFrom?: number;
  readonly latest: boolean;
  readonly status: string;
  readonly walGeneration?: number;
  readonly lineage?: string;
  /** Present when the restore point names compacted objects: its log after the snapshot, run by run. */
  readonly granularity?: readonly { level: number; after: number; to: number }[];
}

function readRecords(path: string): WriterRecord[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as WriterRecord);
}

/** Opens a restored database read-only: its integrity check and content hash. */
function inspect(path: string): { integrity: string; hash: string } {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const rows = database.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[];
    return {
      integrity: rows.map((row) => row.integrity_check).join('; '),
      hash: contentHash(database),
    };
  } finally {
    database.close();
  }
}

const versitygw = s3Server('versitygw');
if (!versitygw) console.warn(`backupd end-to-end: skipped, ${missingReason('versitygw')}`);

describe.skipIf(!versitygw)('backupd end to end on versitygw', () => {
  const { directory, running } = suiteWorkspace('e2e');

  test('replicate through a kill -9 and restart, then ls, verify --deep and exact restores of the latest and a chosen commit', async () => {
    const server = versitygw!;
    const prefix = randomPrefix('backupd-e2e');
    const url = s3Url(server, prefix);
    const env = s3Env(server, {
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_LEASE_TTL: '3s',
      BACKUPD_SHUTDOWN_GRACE: '10s',
    });
    const store = directStore(server);
    const databasePath = join(directory, 'app.db');
    const recordsPath = join(directory, 'records.jsonl');

    const writer = startWriter(databasePath, recordsPath, 5);
    running.push(writer);
    await waitFor('the writer to create the database', () => {
      try {
        return readRecords(recordsPath).length > 5;
      } catch {
        return false;
      }
    });

    const latestCommit = async (): Promise<number | undefined> => {
      const latest = await store.get(`${prefix}/LATEST`);
      if (!latest) return undefined;
      const key = parseLatest(latest.body, { prefix });
      const match = /(\d{20})\.json$/.exec(key);
      return match ? Number(match[1]) : undefined;
    };

    const segmentGenerations = async (): Promise<Set<number>> => {
      const { objects } = await store.list(`${prefix}/wal/`);
      return new Set(
        objects.flatMap((object) => {
          const parsed = parseSegmentKey(prefix, object.key);
          return parsed && parsed.end > parsed.start ? [parsed.generation] : [];
        }),
      );
    };

    // The first instance publishes its first restore point (the snapshot it
    // takes on start) at once, then ships WAL every interval; its next
    // restore point would come a manifest interval (10 s) later. It is
    // killed in between, with WAL shipped that no restore point names yet.
    const first = startBackupd(['replicate', databasePath, url], { env, label: 'first backupd' });
    running.push(first);
    const beforeKill = await waitFor(
      'the first backupd to publish a restore point and ship WAL after it',
      async () => {
        const commit = await latestCommit();
        return commit !== undefined && (await segmentGenerations()).size > 0 ? commit : undefined;
      },
      { describe: () => first.describe() },
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const generationsBeforeKill = await segmentGenerations();

    // The killed instance's lease stays in the bucket; the restarted one (the
    // same database on the same host, so the same kept instance id) takes it
    // back at once and continues the same prefix with a new generation. Restore points come every manifest interval (10 s,
    // the worker's default); the graceful stop below writes the restarted
    // instance's final one, so waiting for its first shipped segment is enough.
    const second = startBackupd(['replicate', databasePath, url], {
      env,
      label: 'restarted backupd',
    });
    running.push(second);
    await waitFor(
      'the restarted backupd to ship WAL of a new generation',
      async () =>
        [...(await segmentGenerations())].some(
          (generation) => !generationsBeforeKill.has(generation),
        ),
      { timeoutMs: 25_000, describe: () => second.describe() },
    );
    // Let the writer run on a little while the restarted instance ships.
    await new Promise((resolve) => setTimeout(resolve, 500));

    expect(await writer.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    const records = readRecords(recordsPath);
    const indexOfHash = new Map(records.map((record, index) => [record.hash, index]));
    expect(indexOfHash.size).toBe(records.length); // every commit's content is distinct

    // Graceful stop: flush what is durable, write the final restore point, release the lease.
    const stopped = await second.stop('SIGTERM');
    expect(stopped, second.describe()).toEqual({ code: 0, signal: null });
    const events = second.logEvents().map((line) => line.event);
    expect(events).toContain('backup.lease_released');

    const listed = await runCli(['ls', url, '--json'], { env });
    expect(listed.code, listed.stderr).toBe(0);
    const points = JSON.parse(listed.stdout) as ListedPoint[];
    expect(points.filter((point) => point.status !== 'ok')).toEqual([]);
    const latest = points.filter((point) => point.latest);
    expect(latest).toHaveLength(1);
    expect(new Set(points.map((point) => point.lineage)).size).toBe(1); // the restart continued the prefix

    // Restore points of both instances: the killed one's (found below) and
    // the restarted one's final restore point, which LATEST names. Every
    // restore point either instance wrote is listed, except one that a
    // compaction superseded: when a level-1 compaction window (30 s, aligned
    // to the wall clock) ends while the restarted instance runs, the
    // segments its first restore point named are merged into one object,
    // the final restore point names that object instead, and retention
    // drops the restore point that named them (@x/backup-worker README,
    // `compactionLevels` and Retention). So the listing holds two restore
    // points then, not three.
    const listedKeys = new Set(points.map((point) => point.manifestKey));
    const written: string[] = [];
    for (const instance of [first, second]) {
      const logged = instance.logEvents();
      logged.forEach((event, index) => {
        if (event.event !== 'backup.restore_point_written') return;
        const key = String(event.manifestKey);
        written.push(key);
        if (listedKeys.has(key)) return;
        const compaction = logged
          .slice(index + 1)
          .find(
            (later) =>
              later.event === 'backup.log_compacted' && later.walGeneration === event.walGeneration,
          );
        expect(
          compaction,
          `restore point ${key} (written by the ${instance.label}) is not listed, and no compaction of its generation followed it`,
        ).toBeDefined();
      });
    }
    expect(written.at(-1)).toBe(latest[0]!.manifestKey);
    expect(points.length).toBeGreaterThanOrEqual(2);

    const verified = await runCli(['verify', url, '--deep'], { env });
    expect(verified.code, `${verified.stdout}\n${verified.stderr}`).toBe(0);
    expect(verified.stdout).toMatch(/verified \d+ restore point\(s\) with CRC-32 checks/);

    const restoreTo = async (name: string, extra: string[]) => {
      const target = join(directory, name, 'app.db');
      const result = await runCli(['restore', url, target, ...extra, '--json'], { env });
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
      const restored = JSON.parse(result.stdout) as { commitSeq: number; manifestKey: string };
      return { ...restored, ...inspect(target) };
    };

    // LATEST, after the writer stopped and backupd flushed, is the writer's
    // very last commit.
    const restoredLatest = await restoreTo('latest', []);
    expect(restoredLatest.integrity).toBe('ok');
    expect(restoredLatest.commitSeq).toBe(latest[0]!.commitSeq);
    expect(restoredLatest.hash).toBe(records.at(-1)!.hash);

    // How backupd's commit numbers map to the writer's: backupd counts the
    // commits it has seen since it first opened the database (its count
    // starts at the snapshot it took then, not at the writer's first commit),
    // and a restart begins a new generation one past the last count it
    // recorded, with a fresh snapshot that already holds whatever the writer
    // committed while backupd was down. So the offset between the two
    // counters is fixed within a generation and jumps at a restart. The
    // mapping is therefore by content: a restored database's hash must be one
    // the writer recorded (membership), restore points must map to writer
    // commits in the same order as their numbers, and within one generation
    // consecutive backupd commits must be consecutive writer commits
    // (exactness: nothing skipped, nothing merged).
    // The restore point the killed instance published is intact and exact.
    const killedPoint = points.find((point) => point.commitSeq === beforeKill);
    expect(killedPoint, `the killed instance's restore point (commit ${beforeKill})`).toBeDefined();
    expect(killedPoint!.walGeneration).not.toBe(latest[0]!.walGeneration);
    const restoredKilled = await restoreTo('killed', ['--commit', String(beforeKill)]);
    expect(restoredKilled.integrity).toBe('ok');
    const killedIndex = indexOfHash.get(restoredKilled.hash);
    expect(
      killedIndex,
      'the killed instance restore point is a commit the writer made',
    ).toBeDefined();

    // A chosen commit inside the restarted instance's generation, and the
    // one after it: consecutive writer commits. Chosen where the log is
    // still fine segments: a commit inside a compacted object (see above)
    // restores only at its end.
    const from = latest[0]!.restorableFrom ?? latest[0]!.commitSeq;
    expect(latest[0]!.commitSeq - from, 'the restarted generation spans commits').toBeGreaterThan(
      10,
    );
    const fineFrom = latest[0]!.granularity?.at(-1)?.after ?? from;
    expect(latest[0]!.granularity?.at(-1)?.level ?? 0).toBe(0); // the chain's last entry stays fine
    expect(latest[0]!.commitSeq - fineFrom, 'fine segments span commits').toBeGreaterThan(1);
    const chosen = Math.floor((fineFrom + latest[0]!.commitSeq) / 2);
    const restoredChosen = await restoreTo('chosen', ['--commit', String(chosen)]);
    const restoredNext = await restoreTo('next', ['--commit', String(chosen + 1)]);
    expect(restoredChosen.commitSeq).toBe(chosen);
    expect(restoredNext.commitSeq).toBe(chosen + 1);
    expect(restoredChosen.integrity).toBe('ok');
    expect(restoredNext.integrity).toBe('ok');
    const chosenIndex = indexOfHash.get(restoredChosen.hash);
    const nextIndex = indexOfHash.get(restoredNext.hash);
    expect(chosenIndex, 'the chosen commit is one the writer made').toBeDefined();
    expect(nextIndex! - chosenIndex!).toBe(1);
    // Order: the killed instance's point < the chosen commit < LATEST, in
    // the writer's commits as in backupd's.
    expect(killedIndex!).toBeLessThan(chosenIndex!);
    expect(nextIndex!).toBeLessThan(indexOfHash.get(restoredLatest.hash)!);
    // Within the generation the offset is fixed: LATEST is as many writer
    // commits after the chosen one as backupd counts.
    expect(indexOfHash.get(restoredLatest.hash)! - chosenIndex!).toBe(
      latest[0]!.commitSeq - chosen,
    );
  });
});
