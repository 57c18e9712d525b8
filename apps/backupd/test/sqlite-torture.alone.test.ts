/**
 * A torture run of the SQLite backup through the `backupd` command: an
 * application process (helpers/torture-writer.ts) follows a seeded plan of
 * bursts of small commits, transactions of 20–32 MiB (above the 16 MiB a
 * capture reads per call), rows dropped so the database shrinks and the
 * same rows written again, VACUUM, and idle points. One scenario per
 * `auto_vacuum` mode: FULL (the file shrinks at the commit), INCREMENTAL
 * (`PRAGMA incremental_vacuum`), NONE (a plain VACUUM). The database grows
 * and shrinks inside one WAL cycle before `replicate` starts, and
 * `replicate` is restarted with SIGTERM and with SIGKILL right after a
 * shrink, so the rows written again land on pages above the size the
 * restarted generation began with.
 *
 * At every idle point the writer records its content hash; the test waits
 * until backupd's newest restore point holds that commit, notes the time,
 * and lets the writer go on. At the end (SIGTERM: exit 0), `restore` of the
 * latest state, `restore --time` at every noted time and `restore --commit`
 * at some of them must equal the writer's record and pass
 * `PRAGMA integrity_check`, and `verify --deep` must pass.
 *
 * TORTURE_SEED=<n> replays a run's plan (printed at the start). It runs
 * alone (`*.alone.test.ts`): its transactions of tens of MiB and full
 * restores would starve the files beside it, and its bounded waits with them.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseLatest, parseManifest } from '@x/manifest';
import { FsStore } from '@x/store';
import { describe, test } from 'vitest';
import {
  baseEnv,
  getText,
  listeningUrl,
  metricValue,
  RunningProcess,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';
import { seededRandom } from './helpers/crash-journal.ts';
import type {
  TorturePlan,
  TorturePoint,
  TortureStep,
  VacuumMode,
} from './helpers/torture-writer.ts';

const WRITER = fileURLToPath(new URL('./helpers/torture-writer.ts', import.meta.url));
const SEED = process.env.TORTURE_SEED
  ? Number(process.env.TORTURE_SEED)
  : Math.floor(Math.random() * 2 ** 31);
const MiB = 1024 * 1024;
const INTERVAL_MS = 200;
const RESTORE_POINT_INTERVAL_MS = 400;
/** How long LATEST must stay put (with nothing captured waiting) before a point's time is noted. */
const QUIET_MS = 2 * RESTORE_POINT_INTERVAL_MS + 2 * INTERVAL_MS;
/** Bound on backupd making one point's commit restorable; item 1 of issue 35 never did. */
const RESTORABLE_WITHIN_MS = 30_000;
/** The prefix a `file://` URL backs up under. */
const PREFIX = 'backup';

console.log(`sqlite torture: TORTURE_SEED=${SEED}`);

/** The steps of one scenario, from the seed: the order of the middle blocks and every size. */
function planFor(seed: number, vacuum: VacuumMode): TorturePlan {
  const random = seededRandom(seed);
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low + 1));
  const burst = (): TortureStep => ({
    kind: 'burst',
    commits: between(10, 50),
    maxPauseMs: between(0, 6),
  });
  const firstBytes = between(150, 400) * 1024;
  const hugeBytes = between(20, 32) * MiB;
  const cycleBytes = between(1, 6) * MiB;
  const blocks: TortureStep[][] = [
    // One transaction of 20–32 MiB of WAL, dropped, then written again after a graceful restart.
    [
      { kind: 'grow', group: 2, bytes: hugeBytes, commits: 1 },
      { kind: 'point', label: `${hugeBytes / MiB} MiB in one transaction` },
      { kind: 'drop', group: 2 },
      { kind: 'point', label: 'the large group dropped', restart: 'SIGTERM' },
      { kind: 'grow', group: 2, bytes: hugeBytes, commits: 1 },
      burst(),
      { kind: 'point', label: 'the large group written again' },
    ],
    // A shrink and regrowth across a kill.
    [
      { kind: 'grow', group: 3, bytes: cycleBytes, commits: between(1, 4) },
      burst(),
      { kind: 'drop', group: 3 },
      { kind: 'point', label: 'group 3 dropped', restart: 'SIGKILL' },
      { kind: 'grow', group: 3, bytes: cycleBytes, commits: between(1, 3) },
      burst(),
      { kind: 'point', label: 'group 3 written again' },
    ],
    // A plain VACUUM, whatever the mode, over a database grown by a medium transaction.
    [
      { kind: 'grow', group: 4, bytes: between(2, 6) * MiB, commits: 1 },
      burst(),
      { kind: 'vacuum' },
      { kind: 'point', label: 'vacuumed' },
    ],
    // The application's own checkpoints between bursts.
    [
      burst(),
      { kind: 'checkpoint', mode: random() < 0.5 ? 'PASSIVE' : 'TRUNCATE' },
      burst(),
      { kind: 'point', label: 'after a checkpoint of the application' },
    ],
  ];
  for (let index = blocks.length - 1; index > 0; index -= 1) {
    const other = Math.floor(random() * (index + 1));
    [blocks[index], blocks[other]] = [blocks[other]!, blocks[index]!];
  }
  return {
    seed,
    vacuum,
    steps: [
      // Grown and shrunk inside one WAL cycle (far below SQLite's 1000-page
      // auto-checkpoint) before replicate starts, then the same rows again.
      { kind: 'grow', group: 1, bytes: firstBytes, commits: 2 },
      { kind: 'drop', group: 1 },
      { kind: 'point', label: 'before replicate started' },
      { kind: 'grow', group: 1, bytes: firstBytes, commits: 1 },
      burst(),
      { kind: 'point', label: 'group 1 written again' },
      ...blocks.flat(),
      burst(),
      { kind: 'point', label: 'the end' },
    ],
  };
}

/** Why the database at `path` is not the writer's `point`, or null when it is. */
function mismatch(path: string, point: TorturePoint): string | null {
  let integrity: string;
  let seq: number;
  try {
    const database = new DatabaseSync(path, { readOnly: true });
    try {
      integrity = (
        database.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[]
      )
        .map((row) => row.integrity_check)
        .join('; ');
      seq = (database.prepare("SELECT seq FROM meta WHERE key = 'seq'").get() as { seq: number })
        .seq;
    } finally {
      database.close();
    }
  } catch (error) {
    return `unreadable: ${String(error)}`;
  }
  if (integrity !== 'ok') return `integrity_check: ${integrity}`;
  const hash = databaseHash(path);
  if (hash === point.hash) return null;
  return `holds writer commit ${seq} (content ${hash.slice(0, 12)}), not commit ${point.seq} of point "${point.label}" (content ${point.hash.slice(0, 12)})`;
}

/** The newest state LATEST names in a `file://` bucket: its key and the newest time it restores. */
async function latestState(bucket: string): Promise<{ key: string; time: number } | undefined> {
  const store = new FsStore({ root: bucket, fsync: false });
  const latest = await store.get(`${PREFIX}/LATEST`);
  if (!latest) return undefined;
  const key = parseLatest(latest.body, { prefix: PREFIX });
  const object = await store.get(key);
  if (!object) return undefined;
  const manifest = parseManifest(object.body, { prefix: PREFIX });
  const times = [manifest.commitTime, manifest.snapshotTime]
    .filter((time): time is string => typeof time === 'string')
    .map(Date.parse);
  return times.length === 0 ? undefined : { key, time: Math.max(...times) };
}

interface Sample {
  readonly point: TorturePoint;
  /** Wall-clock ms at which the point's commit was in LATEST's restore point, the writer idle. */
  readonly time: number;
}

describe('SQLite torture through the backupd command', () => {
  const { directory, running } = suiteWorkspace('sqlite-torture');
  const env = baseEnv({
    BACKUPD_INTERVAL: `${INTERVAL_MS}ms`,
    BACKUPD_RESTORE_POINT_INTERVAL: `${RESTORE_POINT_INTERVAL_MS}ms`,
    // Every commit stays exact (README, "Restore granularity").
    BACKUPD_COMPACTION: 'off',
    BACKUPD_LEASE_TTL: '5s',
  });

  const scenarios: VacuumMode[] = ['full', 'incremental', 'none'];
  for (const [index, vacuum] of scenarios.entries()) {
    // The scenarios run side by side: most of each is idle waiting on backupd.
    test.concurrent(`auto_vacuum ${vacuum.toUpperCase()}: every idle point, the latest state and chosen commits restore to the writer's record`, async ({
      expect,
    }) => {
      const seed = SEED + index;
      const plan = planFor(seed, vacuum);
      const database = join(directory, `${vacuum}.db`);
      const bucket = join(directory, `${vacuum}-backups`);
      const url = pathToFileURL(bucket).href;
      const planPath = join(directory, `${vacuum}-plan.json`);
      writeFileSync(planPath, JSON.stringify(plan));
      const context = () => `TORTURE_SEED=${SEED}, scenario ${vacuum} (seed ${seed})`;

      const writer = new RunningProcess(
        `writer (${vacuum})`,
        process.execPath,
        ['--conditions=@x/source', WRITER, database, planPath],
        { env: baseEnv(), stdin: true },
      );
      running.push(writer);
      let pointsRead = 0;
      const nextPoint = async (): Promise<TorturePoint> => {
        const line = await waitFor(
          `the writer's point ${pointsRead}`,
          () => writer.stdout.split('\n').filter(Boolean)[pointsRead],
          { timeoutMs: 60_000, describe: () => writer.describe() },
        );
        pointsRead += 1;
        return JSON.parse(line) as TorturePoint;
      };

      let replicas = 0;
      const startReplicate = () => {
        replicas += 1;
        const process = startBackupd(
          ['replicate', database, url, '--log-format', 'json', '--listen', '127.0.0.1:0'],
          { env, label: `replicate ${replicas} (${vacuum})` },
        );
        running.push(process);
        return process;
      };
      /** Waits until a restarted replicate has opened its generation (continued or snapshotted). */
      const opened = (process: RunningProcess) =>
        waitFor(
          `${process.label} to open its generation`,
          () =>
            process
              .logEvents()
              .some(
                (e) =>
                  e.event === 'backup.generation_continued' ||
                  e.event === 'backup.snapshot_uploaded',
              ),
          { timeoutMs: RESTORABLE_WITHIN_MS, describe: () => process.describe() },
        );

      /**
       * Waits until LATEST holds the point's commit: its newest time is not
       * before the commit's transaction began, and then LATEST stays put
       * with nothing captured or shipped waiting for a quiet spell.
       */
      const settle = async (point: TorturePoint, replicate: RunningProcess): Promise<number> => {
        const metricsUrl = `${await listeningUrl(replicate)}/metrics`;
        const what = `point ${point.point} "${point.label}" (writer commit ${point.seq}, ${point.pageCount} pages)`;
        try {
          let state = await waitFor(
            `backupd to make ${what} restorable`,
            async () => {
              const latest = await latestState(bucket);
              return latest && latest.time >= point.lastBeganAt ? latest : undefined;
            },
            { timeoutMs: RESTORABLE_WITHIN_MS, describe: () => replicate.describe() },
          );
          let since = Date.now();
          await waitFor(
            `LATEST to stay put after ${what}`,
            async () => {
              const now = await latestState(bucket);
              const metrics = (await getText(metricsUrl)).body;
              const waiting =
                (metricValue(metrics, 'backupd_unrestorable_commits') ?? 1) +
                (metricValue(metrics, 'backupd_unshipped_bytes') ?? 1);
              if (now?.key !== state.key || waiting > 0) {
                state = now ?? state;
                since = Date.now();
              }
              return Date.now() - since >= QUIET_MS;
            },
            { timeoutMs: RESTORABLE_WITHIN_MS, describe: () => replicate.describe() },
          );
          return Date.now();
        } catch (error) {
          // Say also what the stop makes of it: an exit 0 here claims the
          // commit is backed up.
          const stopped = await replicate.stop('SIGTERM', 30_000);
          const abandoned = replicate
            .logEvents()
            .filter(
              (e) =>
                e.event === 'backup.flush_abandoned' || e.event === 'backupd.stopped_incomplete',
            )
            .map((e) => e.event);
          throw new Error(
            `${context()}: ${(error as Error).message.split('\n')[0]}; SIGTERM then gave exit ${stopped.code} (${abandoned.join(', ') || 'no flush_abandoned or stopped-incomplete logged'})`,
            { cause: error },
          );
        }
      };

      const samples: Sample[] = [];
      let replicate: RunningProcess | undefined;
      for (const step of plan.steps) {
        if (step.kind !== 'point') continue;
        const point = await nextPoint();
        expect(point.label).toBe(step.label);
        if (!replicate) replicate = startReplicate();
        samples.push({ point, time: await settle(point, replicate) });
        if (step.restart) {
          const stopped = await replicate.stop(step.restart, 30_000);
          if (step.restart === 'SIGTERM')
            expect(stopped, `${context()}: ${replicate.describe()}`).toEqual({
              code: 0,
              signal: null,
            });
          replicate = startReplicate();
          await opened(replicate);
        }
        writer.child.stdin!.write('go\n');
      }
      expect(await writer.exited, writer.describe()).toEqual({ code: 0, signal: null });
      const last = samples.at(-1)!.point;
      const stopped = await replicate!.stop('SIGTERM', 60_000);
      expect(stopped, `${context()}: ${replicate!.describe()}`).toEqual({ code: 0, signal: null });
      expect(
        replicate!.logEvents().filter((e) => e.event === 'backupd.stopped_incomplete'),
      ).toEqual([]);
      // Every point is a distinct state: a restore that lands on the wrong one is seen.
      expect(new Set(samples.map((s) => s.point.hash)).size).toBe(samples.length);

      // Every restore is tried, and every failure listed: one run says all it found.
      const problems: string[] = [];
      const restore = async (name: string, args: readonly string[], point: TorturePoint) => {
        const target = join(directory, `${vacuum}-restored`, `${name}.db`);
        const result = await runCli(['restore', url, target, ...args, '--json'], {
          env,
          timeoutMs: 60_000,
        });
        const what = `restore ${args.join(' ') || 'of the latest state'} (point ${point.point} "${point.label}")`;
        if (result.code !== 0) {
          const reason = result.stderr.split('\n').find((line) => line.startsWith('backupd'));
          problems.push(`${what}: exit ${result.code}: ${reason ?? result.stderr.slice(-300)}`);
          return undefined;
        }
        const problem = mismatch(target, point);
        if (problem) problems.push(`${what}: ${problem}`);
        return {
          target,
          commitSeq: (JSON.parse(result.stdout) as { commitSeq: number }).commitSeq,
        };
      };

      const pointSteps = plan.steps.filter((step) => step.kind === 'point');
      const jobs: (() => Promise<void>)[] = [
        async () => {
          const latest = await restore('latest', [], last);
          if (!latest) return;
          // The comparison can fail: the latest state is neither the point before it nor a made-up record.
          expect(mismatch(latest.target, samples.at(-2)!.point)).toMatch(/^holds writer commit/);
          expect(mismatch(latest.target, { ...last, hash: '0'.repeat(64) })).toMatch(
            /^holds writer commit/,
          );
        },
        async () => {
          const verified = await runCli(['verify', url, '--deep'], { env, timeoutMs: 90_000 });
          if (verified.code !== 0)
            problems.push(
              `verify --deep: exit ${verified.code}: ${verified.stdout}${verified.stderr}`,
            );
        },
        ...samples.map((sample, index) => async () => {
          const at = new Date(sample.time).toISOString();
          const restored = await restore(`point-${index}`, ['--time', at], sample.point);
          // By commit number too: the large transaction, and the point after the kill.
          const chosen =
            /MiB in one transaction/.test(sample.point.label) ||
            pointSteps[index - 1]?.restart === 'SIGKILL';
          if (restored && chosen)
            await restore(
              `commit-${restored.commitSeq}`,
              ['--commit', String(restored.commitSeq)],
              sample.point,
            );
        }),
      ];
      // Two at a time: the machine's two cores.
      await Promise.all(
        [0, 1].map(async () => {
          for (let job = jobs.shift(); job; job = jobs.shift()) await job();
        }),
      );
      expect(problems.join('\n'), context()).toBe('');
    }, 240_000);
  }
});
