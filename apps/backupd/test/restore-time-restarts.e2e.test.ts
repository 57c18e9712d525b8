/**
 * Restore by time around restarts, through the `backupd` command and real
 * processes: a writer commits (helpers/crash-writer.ts, every commit
 * journaled with its time and content hash); `backupd replicate` is
 * SIGKILLed while the writer goes on (commits no backup sees until the
 * restart's snapshot), then restarted with the writer paused. Samples are
 * taken while the writer is paused: right after a restart's first restore
 * point (the answer is the new snapshot's state, which the previous
 * generation lacks), and in the middle of a run. `restore --time` at each
 * must give exactly the writer's journaled state at that time, and its
 * `--json` a commit time at or before it, after the commit before it (or,
 * after a restart, at or after the restart).
 */

import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';
import {
  baseEnv,
  RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { crashStateHash, journalStateAt, readJournal } from './helpers/crash-journal.ts';

const CRASH_WRITER = fileURLToPath(new URL('./helpers/crash-writer.ts', import.meta.url));
/** Kill-and-restart cycles. */
const CYCLES = 3;

interface Sample {
  readonly time: number;
  /** Set for a sample right after a restart: when that replicate was started. */
  readonly restartedAt?: number;
}

describe('restore --time around SIGKILLs and restarts', () => {
  const { directory, running } = suiteWorkspace('time-restarts');

  test('every sample restores the writer’s state at that time, and says its commit time', async () => {
    const database = join(directory, 'app.db');
    const journal = join(directory, 'journal.jsonl');
    const url = pathToFileURL(join(directory, 'backups')).href;
    const env = baseEnv({
      BACKUPD_INTERVAL: '200ms',
      BACKUPD_RESTORE_POINT_INTERVAL: '300ms',
      BACKUPD_LEASE_TTL: '5s',
    });
    const writer = new RunningProcess(
      'writer',
      process.execPath,
      [CRASH_WRITER, database, journal, '7', '15'],
      { env: baseEnv(), stdin: true },
    );
    running.push(writer);
    const command = async (line: string, answer: string) => {
      const before = writer.stdout.length;
      writer.child.stdin!.write(`${line}\n`);
      await waitFor(`writer: ${answer}`, () => writer.stdout.slice(before).includes(answer), {
        describe: () => writer.describe(),
      });
    };
    await waitFor('the writer’s first commits', () => {
      try {
        return readJournal(journal).length > 5;
      } catch {
        return false;
      }
    });
    const points = async () =>
      JSON.parse((await runCli(['ls', url, '--json'], { env })).stdout || '[]') as {
        walGeneration?: number;
        createdAt?: string;
        commitTime?: string | null;
        snapshotTime?: string | null;
      }[];
    const newestGeneration = async () =>
      Math.max(-1, ...(await points()).map((point) => point.walGeneration ?? -1));
    /** Waits for a restore point made after `time` (the writer running, so one comes). */
    const restorePointAfter = (time: number, replicate: RunningProcess) =>
      waitFor(
        'a restore point after the sample',
        async () => (await points()).some((p) => Date.parse(p.createdAt ?? '') > time),
        { timeoutMs: 30_000, describe: () => replicate.describe() },
      );

    const samples: Sample[] = [];
    let generation = -1;
    let replicate = startBackupd(['replicate', database, url], { env });
    running.push(replicate);
    for (let cycle = 0; cycle <= CYCLES; cycle += 1) {
      // The replicate's first restore point of a new generation, the writer
      // paused since before it started (except the very first).
      const started = Date.now();
      await waitFor(
        'the new generation’s first restore point',
        async () => (await newestGeneration()) > generation,
        {
          timeoutMs: 30_000,
          describe: () => replicate.describe(),
        },
      );
      generation = await newestGeneration();
      if (cycle > 0) {
        await sleep(150);
        samples.push({ time: Date.now(), restartedAt: started });
        await sleep(150);
        await command('resume', 'resumed');
      }
      // A sample in the middle of the run.
      await sleep(400);
      await command('pause', 'paused');
      // A commit's time is when backupd captured it (SQLite records none):
      // the quiet second lets a capture delayed by a loaded machine land
      // before the sample.
      await sleep(1000);
      const middle = Date.now();
      samples.push({ time: middle });
      await sleep(150);
      await command('resume', 'resumed');
      await restorePointAfter(middle + 800, replicate);
      if (cycle === CYCLES) break;
      // The kill, with the writer committing on while no backup runs.
      await replicate.stop('SIGKILL');
      await sleep(300);
      await command('pause', 'paused');
      replicate = startBackupd(['replicate', database, url], {
        env,
        label: `replicate ${cycle + 1}`,
      });
      running.push(replicate);
    }
    await replicate.stop('SIGTERM');
    await command('stop', 'stopped');

    const entries = readJournal(journal);
    for (const [index, sample] of samples.entries()) {
      const target = join(directory, `sample-${index}.db`);
      const at = new Date(sample.time).toISOString();
      const restored = await runCli(['restore', url, target, '--time', at, '--json'], { env });
      expect(restored.code, `${at}: ${restored.stderr}`).toBe(0);
      const result = JSON.parse(restored.stdout) as { commitSeq: number; commitTime: string };
      const expected = journalStateAt(entries, sample.time)!;
      const restoredDb = new DatabaseSync(target, { readOnly: true });
      const hash = crashStateHash(restoredDb);
      restoredDb.close();
      expect(hash, `sample ${index} at ${at} (writer commit ${expected.seq})`).toBe(expected.hash);
      const commitTime = Date.parse(result.commitTime);
      expect(commitTime, `sample ${index}`).toBeLessThanOrEqual(sample.time);
      if (sample.restartedAt !== undefined)
        expect(commitTime, `sample ${index}: the restart's snapshot`).toBeGreaterThanOrEqual(
          sample.restartedAt,
        );
      else if (expected.seq > 0)
        expect(commitTime, `sample ${index}`).toBeGreaterThan(entries[expected.seq - 1]!.time);
    }
    expect(samples.filter((sample) => sample.restartedAt !== undefined)).toHaveLength(CYCLES);

    // The latest, by manifest and by commit: each says the commit time ls shows for it.
    const listed = (await points()) as {
      manifestKey: string;
      commitSeq: number;
      commitTime: string | null;
      snapshotTime: string | null;
      latest: boolean;
    }[];
    const latest = listed.find((point) => point.latest)!;
    expect(latest.commitTime).not.toBeNull();
    expect(Date.parse(latest.snapshotTime!)).toBeLessThanOrEqual(Date.parse(latest.commitTime!));
    for (const args of [
      [],
      ['--manifest', latest.manifestKey],
      ['--commit', String(latest.commitSeq)],
    ]) {
      const target = join(directory, `latest-${args.join('-').replace(/\W/g, '_')}.db`);
      const restored = await runCli(['restore', url, target, ...args, '--json'], { env });
      expect(restored.code, restored.stderr).toBe(0);
      const result = JSON.parse(restored.stdout) as { commitSeq: number; commitTime: string };
      expect(result.commitSeq).toBe(latest.commitSeq);
      expect(result.commitTime, args.join(' ')).toBe(latest.commitTime);
      const text = await runCli(['restore', url, `${target}.text`, ...args], { env });
      expect(text.stdout).toContain(
        `commit time of commit ${latest.commitSeq}: ${latest.commitTime}`,
      );
    }
  }, 240_000);
});
