/**
 * How large the WAL gets (the SQLite README's section of that name): a
 * separate application commits back to back a fixed number of times, with
 * `backupd replicate` at its defaults (its default idle CPU priority
 * included) and one more process keeping a CPU busy, as on a loaded
 * machine: backupd then runs mostly while the application sleeps in its
 * commit's fsync, holding the write lock, and gets the lock only now and
 * then. Without the insistent restart (a restart past 1.5 times the
 * threshold uses the first write lock it gets) the WAL grew here to 16-45
 * thousand frames against the 10 000-frame threshold.
 *
 * The same at `synchronous=NORMAL` (no fsync: the application commits
 * faster than backupd captures, 90 thousand single-row commits a second
 * here), without the busy process (with every CPU busy, backupd at idle
 * priority barely runs: the README states that limit). Without the forced
 * restart (the whole backlog read under the write lock) the WAL grew to
 * 67 thousand frames in 300 000 commits, and to 200-420 thousand in longer
 * runs.
 *
 * What must hold: the `-wal` file never outgrew the stated bound (without
 * `truncateWalFile` SQLite never shrinks the file, so its size at the end is
 * the largest the WAL ever was: no sample can miss a peak), and the restored
 * database holds every commit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, RunningProcess, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const WRITER = fileURLToPath(new URL('./fixtures/counted-writer.ts', import.meta.url));
const COMMITS = 60_000;
/** The default restart threshold (`truncateCheckpointPages`). */
const THRESHOLD_FRAMES = 10_000;
/**
 * The README's bound at the defaults: the restart insists past 1.5 times the
 * threshold, plus what the application commits until backupd next gets the
 * write lock, stated there as at most 2.5 times the threshold again
 * (measured here: 13.7-24.6 thousand frames with the insistent restart,
 * 11.8-51.7 thousand without; on a busier day 17.2-37.6 thousand with it,
 * 6 runs of 21 past 3 times the threshold; the mechanism itself is checked
 * without timing by packages/source-sqlite/test/insistent-restart.test.ts).
 */
const BOUND_FRAMES = 4 * THRESHOLD_FRAMES;
const PAGE_SIZE = 4096;
const WAL_HEADER_BYTES = 32;
const FRAME_BYTES = 24 + PAGE_SIZE;

const directory = mkdtempSync(join(tmpdir(), 'backupd-wal-bound-'));
const others: ChildProcess[] = [];
afterAll(() => {
  for (const other of others) other.kill('SIGKILL');
  rmSync(directory, { recursive: true, force: true });
});

async function writeBackToBack(options: {
  name: string;
  commits: number;
  synchronous: 'FULL' | 'NORMAL';
  busyCpu: boolean;
}): Promise<void> {
  const database = join(directory, `${options.name}.db`);
  const backups = pathToFileURL(join(directory, `${options.name}-backups`)).href;
  const setup = new DatabaseSync(database);
  setup.exec(
    'PRAGMA journal_mode=WAL; CREATE TABLE rows (id INTEGER PRIMARY KEY, text TEXT NOT NULL);',
  );
  setup.close();
  // The product's defaults, its CPU priority included.
  const env = baseEnv();
  delete env.BACKUPD_CPU_PRIORITY;
  const backupd = startBackupd(['replicate', database, backups, '--log-format', 'json'], { env });
  await waitFor(
    'the first restore point',
    async () => {
      const listed = await runCli(['ls', backups, '--json'], { env });
      return listed.code === 0 && (JSON.parse(listed.stdout) as unknown[]).length > 0;
    },
    { describe: () => backupd.describe() },
  );

  // Other work keeping a CPU busy for as long as the application writes.
  const busy = options.busyCpu
    ? spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })
    : null;
  if (busy) others.push(busy);
  const writer = new RunningProcess(
    'writer',
    process.execPath,
    [WRITER, database, String(options.commits), options.synchronous],
    { env: baseEnv() },
  );
  const written = await writer.exited;
  busy?.kill('SIGKILL');
  expect(written.code, writer.describe()).toBe(0);

  // Read while backupd still holds its reader (nothing can delete the file).
  const walFrames = (statSync(`${database}-wal`).size - WAL_HEADER_BYTES) / FRAME_BYTES;
  const stopped = await backupd.stop('SIGTERM', 90_000);
  expect(stopped.code, backupd.describe()).toBe(0);

  const restored = join(directory, `${options.name}-restored.db`);
  const restore = await runCli(['restore', backups, restored], { env, timeoutMs: 120_000 });
  expect(restore.code, restore.stderr).toBe(0);
  const check = new DatabaseSync(restored, { readOnly: true });
  const { rows, newest } = check
    .prepare('SELECT count(*) AS rows, coalesce(max(id), 0) AS newest FROM rows')
    .get() as { rows: number; newest: number };
  check.close();
  expect({ rows, newest }).toEqual({ rows: options.commits, newest: options.commits });
  expect(walFrames, `the WAL's largest size, in frames`).toBeLessThanOrEqual(BOUND_FRAMES);
}

describe('the WAL under an application committing back to back', () => {
  it(`stays under ${BOUND_FRAMES} frames at the defaults beside a busy CPU (synchronous=FULL), and every commit is restorable`, async () => {
    await writeBackToBack({ name: 'full', commits: COMMITS, synchronous: 'FULL', busyCpu: true });
  }, 240_000);

  it(`stays under ${BOUND_FRAMES} frames at the defaults when the application outruns the capture (synchronous=NORMAL), and every commit is restorable`, async () => {
    await writeBackToBack({
      name: 'normal',
      commits: 300_000,
      synchronous: 'NORMAL',
      busyCpu: false,
    });
  }, 240_000);
});
