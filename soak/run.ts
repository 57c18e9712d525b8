/**
 * The soak: `pnpm soak`. Every promise of backupd at once, under faults, for
 * a bounded time (SOAK_MINUTES, default 3; seeded by SOAK_SEED, printed).
 *
 * Setup: versitygw (S3) on 127.0.0.1 behind the fault-injecting proxy; a
 * SQLite writer process (random transactions, random checkpoints of every
 * mode including TRUNCATE, a record of every commit's content hash); two
 * `backupd replicate` processes, A and B, on the same database and the same
 * prefix, each incarnation through its own proxy port.
 *
 * Chaos, for SOAK_MINUTES minus the time kept for the final checks: SIGKILLs
 * of either replica (the lease holder more often) or both, restarts after a
 * random pause, graceful restarts, partitions longer than a lease TTL, and
 * all along latency, 503s, 500s, resets, 409 conflicts, stalled bodies and
 * lost responses at low probability.
 *
 * Checked:
 * - after every kill: `backupd verify --deep` passes (every manifest
 *   verifies, LATEST names one of them) and every restore point `ls` lists is
 *   sound; what the restore points cover then is remembered;
 * - from the proxy's write log (not from the processes' logs): two processes
 *   never both wrote (the rule is in exclusion.ts);
 * - at the end (writer stopped, faults off, replicas sent SIGTERM): both exit
 *   0; verify passes; LATEST and 20 random commits restore, pass
 *   `PRAGMA integrity_check`, and equal the writer's record for that commit
 *   (mapping below); LATEST holds the writer's last commit; and every commit
 *   any restore point covered at any check during the run is still covered
 *   (retention is set high enough that nothing leaves the window, so this is
 *   strict).
 *
 * Compaction runs at shortened levels (10 s, 1 min) through it all. A
 * compacted object restores only at its end, so the 20 commits are drawn
 * from the covered ones not strictly inside a compacted object the final
 * restore points name; the summary says how many objects formed.
 *
 * Mapping backupd commit numbers to the writer's commits: backupd counts
 * commits its own way (one per SQLite commit it captured, plus one at every
 * new generation, from a count kept beside the database), so its numbers are
 * not the writer's. But every writer commit changes the `soak_clock` row, so
 * each writer commit has a unique content hash: a restored database's hash
 * must be one of the writer's (membership), which names the writer commit it
 * is. Order: a higher backupd commit never holds an older writer commit, and
 * inside one restore point (one unbroken generation, every SQLite commit
 * captured) backupd commits N1 < N2 hold writer commits exactly N2 − N1 apart;
 * at least that far apart when a restart continued the generation after a
 * crash in between (what was committed meanwhile is one backupd commit).
 *
 * Exit code 0 and a last line `soak: ok`, or 1 and `soak: FAILED (<reason>)`.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { readLease } from '@x/lease';
import { parseManifest, parseSegmentKey } from '@x/manifest';
import { restore } from '@x/restore';
import { sqliteContentHash as contentHash, sqliteMaterializer } from '@x/source-sqlite';
import { S3Store } from '@x/store-s3';
import { type FaultProxy, type FaultSchedule, startFaultProxy } from '@x/test-faults';
import { type StartedTestServers, startTestServers } from '@x/test-servers/harness';
import {
  commitMappingViolations,
  continuationPointsOf,
  type MappedRestore,
  selfTestCommitMapping,
} from './commit-mapping.ts';
import {
  compactedInteriors,
  covered,
  difference,
  format,
  type Interval,
  members,
  merge,
  type RestorePoint,
  size,
} from './coverage.ts';
import { checkExclusion, describeFinding, selfTestExclusion } from './exclusion.ts';
import {
  type Env,
  lastLines,
  parseJsonOutput,
  Replica,
  runBackupd,
  type UnexpectedExit,
} from './processes.ts';
import { Random } from './random.ts';

// ---------------------------------------------------------------- settings

/** The soak runs outside turbo (`pnpm soak`), so its settings are no turbo task inputs. */
function setting(name: 'SOAK_MINUTES' | 'SOAK_SEED' | 'SOAK_KEEP'): string | undefined {
  return process.env[name];
}

const minutes = Number(setting('SOAK_MINUTES') ?? '3');
const seedSetting = setting('SOAK_SEED');
const seed =
  seedSetting !== undefined ? Number(seedSetting) : randomBytes(4).readUInt32BE(0) & 0x7fffffff;
if (!Number.isFinite(minutes) || minutes <= 0) fail(`SOAK_MINUTES must be > 0, got ${minutes}`);
if (!Number.isSafeInteger(seed)) fail(`SOAK_SEED must be an integer, got ${seed}`);

/** Kept for server start, the final shutdown, verify and restores. */
const RESERVED_MS = 50_000;
const chaosMs = Math.max(30_000, minutes * 60_000 - RESERVED_MS);
const LEASE_TTL_S = 3;
const INTERVAL = '500ms';
const SHUTDOWN_GRACE_S = 10;
/** High enough that no restore point is retired during the run: "no commit lost" is strict. */
const RETENTION = 1_000_000;
/**
 * Shortened compaction levels, so both levels form (and retention deletes
 * what they replace) while the chaos runs, kills and partitions included.
 */
const COMPACTION = '10s,1m';
const RESTORES = 20;

const faultSchedule: FaultSchedule = {
  rules: [
    { kind: 'latency', probability: 0.08, latencyMs: [20, 400] },
    { kind: 'error503', probability: 0.02 },
    { kind: 'error500', probability: 0.005 },
    { kind: 'reset', probability: 0.01 },
    { kind: 'conflict', methods: ['PUT'], probability: 0.006 },
    { kind: 'lostResponse', methods: ['PUT', 'POST', 'DELETE'], probability: 0.015 },
    { kind: 'stall', methods: ['GET'], probability: 0.006, stallMs: 1_500 },
  ],
};

// ---------------------------------------------------------------- state

const random = new Random(seed);
const violations: string[] = [];
const notes: string[] = [];
const unexpectedExits: UnexpectedExit[] = [];
let servers: StartedTestServers | undefined;
let proxy: FaultProxy | undefined;
let workDirectory = '';
const startedAt = Date.now();

function log(message: string): void {
  const seconds = ((Date.now() - startedAt) / 1000).toFixed(1).padStart(6);
  process.stdout.write(`[soak ${seconds}s] ${message}\n`);
}

function violation(message: string): void {
  violations.push(message);
  log(`VIOLATION: ${message}`);
}

/** Ends the run early with a reason (cleanup still happens). */
class SoakAbort extends Error {}

/** Every child process started, killed if the soak itself breaks. */
const children: { kill(signal: NodeJS.Signals): unknown }[] = [];

function fail(reason: string): never {
  process.stdout.write(`soak: FAILED (${reason})\n`);
  process.exit(1);
}

// ---------------------------------------------------------------- the run

async function main(): Promise<void> {
  log(
    `seed ${seed} (SOAK_SEED=${seed} replays the plan), ${minutes} min: chaos ${Math.round(chaosMs / 1000)} s, lease TTL ${LEASE_TTL_S}s`,
  );
  const selfTest = selfTestExclusion() ?? selfTestCoverage() ?? selfTestCommitMapping();
  if (selfTest) throw new SoakAbort(`self-test: ${selfTest}`);

  servers = await startTestServers({ only: ['versitygw'] });
  const s3 = servers.servers.s3.find((server) => server.name === 'versitygw');
  if (!s3) {
    const why = servers.servers.missing.map((entry) => `${entry.name}: ${entry.reason}`).join('; ');
    throw new SoakAbort(`versitygw is not available (${why})`);
  }
  log(`versitygw ${s3.version} at ${s3.endpoint}`);

  workDirectory = await mkdtemp(join(tmpdir(), 'backupd-soak-'));
  const logDirectory = join(workDirectory, 'logs');
  await mkdir(logDirectory);
  proxy = await startFaultProxy({
    target: s3.endpoint,
    seed,
    schedule: faultSchedule,
    log: join(logDirectory, 'proxy.jsonl'),
  });
  const prefix = `soak-${seed}-${randomBytes(3).toString('hex')}`;
  const leasePath = `/${s3.bucket}/${prefix}/LEASE`;
  const urlVia = (endpoint: string) =>
    `s3://${s3.bucket}/${prefix}?endpoint=${encodeURIComponent(endpoint)}&forcePathStyle=true&region=${s3.region}`;
  /** Checks read the server directly: the faults are for the replicas, not for the judge. */
  const directUrl = urlVia(s3.endpoint);
  const env: Env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
    AWS_REGION: s3.region,
    AWS_EC2_METADATA_DISABLED: 'true',
    // Two replicates of one database on one host, so that the bucket lease
    // alone must keep them apart (the local database lock would refuse the
    // second at once; across hosts there is no such lock).
    BACKUPD_DATABASE_LOCK: 'off',
    BACKUPD_INTERVAL: INTERVAL,
    BACKUPD_LEASE_TTL: `${LEASE_TTL_S}s`,
    BACKUPD_RETENTION: String(RETENTION),
    BACKUPD_COMPACTION: COMPACTION,
    BACKUPD_SHUTDOWN_GRACE: `${SHUTDOWN_GRACE_S}s`,
  };
  log(`work directory ${workDirectory}, prefix ${prefix}`);

  // The database, created before anyone attaches.
  const databasePath = join(workDirectory, 'app.db');
  {
    const database = new DatabaseSync(databasePath);
    database.exec('PRAGMA journal_mode=WAL');
    database.exec('CREATE TABLE soak_clock (id INTEGER PRIMARY KEY, commits INTEGER NOT NULL)');
    database.exec('INSERT INTO soak_clock VALUES (1, 0)');
    database.exec(
      'CREATE TABLE items_0 (id INTEGER PRIMARY KEY, label TEXT, payload BLOB, counter INTEGER DEFAULT 0)',
    );
    database.close();
  }

  // The writer.
  const recordsPath = join(workDirectory, 'writer-records.jsonl');
  const writer = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./writer.ts', import.meta.url)),
      databasePath,
      recordsPath,
      String(seed),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(writer);
  let writerOut = '';
  let writerErr = '';
  writer.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    writerOut += chunk;
  });
  writer.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    writerErr += chunk;
  });
  let writerStopping = false;
  const writerExited = new Promise<number | null>((resolve) => {
    writer.on('exit', (code, signal) => {
      if (!writerStopping)
        violation(
          `the writer died (${code ?? signal}) during the run: ${lastLines(writerErr, 10)}`,
        );
      resolve(code);
    });
  });

  // Peak WAL size, sampled.
  let peakWalBytes = 0;
  const walSampler = setInterval(() => {
    try {
      peakWalBytes = Math.max(peakWalBytes, statSync(`${databasePath}-wal`).size);
    } catch {
      // No -wal file at this moment (after a TRUNCATE or before the first write).
    }
  }, 100);

  // The lease, read directly from the server: generations and holders.
  const judgeStore = new S3Store({
    bucket: s3.bucket,
    region: s3.region,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  const leaseWatch = { firstGeneration: 0, lastGeneration: 0, increments: 0, readErrors: 0 };
  let watchingLease = true;
  const leaseWatcher = (async () => {
    while (watchingLease) {
      try {
        const found = await readLease(judgeStore, prefix, { signal: AbortSignal.timeout(5_000) });
        if (found) {
          const generation = found.record.generation;
          if (leaseWatch.firstGeneration === 0) leaseWatch.firstGeneration = generation;
          if (generation < leaseWatch.lastGeneration)
            violation(
              `the lease generation went backwards: ${leaseWatch.lastGeneration} -> ${generation}`,
            );
          if (generation > leaseWatch.lastGeneration && leaseWatch.lastGeneration !== 0)
            leaseWatch.increments += generation - leaseWatch.lastGeneration;
          leaseWatch.lastGeneration = Math.max(leaseWatch.lastGeneration, generation);
        }
      } catch {
        leaseWatch.readErrors += 1;
      }
      await sleep(250);
    }
  })();

  // Peak resident memory of each replica slot (a standby keeps capturing
  // commits it does not ship; this shows whether that costs memory).
  const peakRssBytes: Record<string, number> = {};
  const rssSampler = setInterval(() => {
    for (const replica of replicas) {
      const pid = replica.pid;
      if (pid === undefined) continue;
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const kilobytes = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        peakRssBytes[replica.name] = Math.max(peakRssBytes[replica.name] ?? 0, kilobytes * 1024);
      } catch {
        // Exited between the check and the read, or no /proc (not Linux).
      }
    }
  }, 1_000);

  // The replicas.
  const replicas = ['A', 'B'].map(
    (name) =>
      new Replica({
        name,
        databasePath,
        env,
        logDirectory,
        urlFor: async (tag) => ({ url: urlVia(await proxy!.urlFor(tag)) }),
        unexpectedExits,
      }),
  );
  for (const replica of replicas) children.push({ kill: () => replica.kill() });
  for (const replica of replicas) await replica.start();
  log(`replicas ${replicas.map((replica) => replica.tag).join(', ')} started`);

  // ------------------------------------------------------------ checks during the run

  let everCovered: Interval[] = [];
  let highWater = -1;
  let checks = 0;
  const verifyAndRecord = async (label: string): Promise<void> => {
    const [verified, listed] = await Promise.all([
      runBackupd(['verify', directUrl, '--deep', '--json'], env),
      runBackupd(['ls', directUrl, '--json'], env),
    ]);
    checks += 1;
    try {
      const report = parseJsonOutput<VerifyJson>(verified, `verify after ${label}`);
      // Before the first restore point there is nothing to verify (verify
      // calls a prefix without one not ok, LATEST missing); after one existed,
      // an empty prefix is a loss.
      const empty =
        report.manifests.length === 0 &&
        report.latest.manifestKey === null &&
        report.problems.length === 0;
      if (empty && highWater >= 0)
        violation(
          `after ${label} the prefix has no restore point, though one covered commit ${highWater}`,
        );
      else if (!report.ok && !empty)
        violation(`verify failed after ${label}: ${describeVerify(report)}`);
    } catch (error) {
      violation((error as Error).message);
    }
    try {
      const points = parseJsonOutput<RestorePoint[]>(listed, `ls after ${label}`);
      for (const point of points) {
        if (point.status !== 'ok')
          violation(`ls after ${label}: ${point.manifestKey}: ${point.problems.join('; ')}`);
        highWater = Math.max(highWater, point.commitSeq);
      }
      everCovered = merge([...everCovered, ...covered(points)]);
      log(
        `check after ${label}: ${points.length} restore points, covering ${format(covered(points).slice(-3), 3)} (last 3 ranges); high-water ${highWater}`,
      );
    } catch (error) {
      violation((error as Error).message);
    }
  };

  // ------------------------------------------------------------ chaos

  const actions = {
    killHolder: 0,
    killOther: 0,
    killBoth: 0,
    gracefulRestart: 0,
    partitions: 0,
    quiet: 0,
  };
  const pendingRestarts = new Set<Promise<void>>();
  /** At most one pending restart per replica. */
  const restartPending = new Set<Replica>();
  const restartLater = (replica: Replica, delayMs: number) => {
    if (restartPending.has(replica)) return;
    restartPending.add(replica);
    const pending = (async () => {
      await sleep(delayMs);
      restartPending.delete(replica);
      if (!replica.alive) await replica.start();
    })();
    pendingRestarts.add(pending);
    void pending.finally(() => pendingRestarts.delete(pending));
  };
  /** The replica whose incarnation wrote the lease last (as the proxy saw it). */
  const holder = (): Replica | undefined => {
    const leaseWrites = proxy!.writeLog().filter((entry) => entry.path === leasePath);
    const last = leaseWrites[leaseWrites.length - 1];
    return replicas.find((replica) => replica.alive && replica.tag === last?.caller);
  };

  const chaosEnd = Date.now() + chaosMs;
  let reportedExits = 0;
  while (Date.now() < chaosEnd) {
    await sleep(Math.min(random.integer(3_000, 9_000), Math.max(0, chaosEnd - Date.now())));
    if (Date.now() >= chaosEnd) break;
    // A replica that exited by itself is noted (a finding) and restarted.
    while (reportedExits < unexpectedExits.length) {
      const exit = unexpectedExits[reportedExits]!;
      reportedExits += 1;
      violation(
        `replica ${exit.tag} exited by itself (${exit.code ?? exit.signal}); its log ends:\n${exit.logTail}`,
      );
    }
    for (const replica of replicas)
      if (!replica.alive && !restartPending.has(replica)) restartLater(replica, 0);
    const live = replicas.filter((replica) => replica.alive);

    const roll = random.next();
    if (live.length === 0) {
      actions.quiet += 1;
    } else if (roll < 0.3) {
      const target = holder() ?? random.pick(live);
      actions.killHolder += 1;
      log(`SIGKILL ${target.tag} (lease holder)`);
      await target.kill();
      restartLater(target, random.integer(300, 4_000));
      await verifyAndRecord(`SIGKILL ${target.tag}`);
    } else if (roll < 0.48) {
      const current = holder();
      const target = live.find((replica) => replica !== current) ?? random.pick(live);
      actions.killOther += 1;
      log(`SIGKILL ${target.tag || target.name} (not the holder)`);
      await target.kill();
      restartLater(target, random.integer(300, 4_000));
      await verifyAndRecord(`SIGKILL ${target.tag}`);
    } else if (roll < 0.56) {
      actions.killBoth += 1;
      log(`SIGKILL ${live.map((replica) => replica.tag).join(' and ')}`);
      await Promise.all(live.map((replica) => replica.kill()));
      for (const replica of live) restartLater(replica, random.integer(300, 4_000));
      await verifyAndRecord('SIGKILL of both');
    } else if (roll < 0.66) {
      // Mostly the holder: its standby then takes over at once ("after release").
      const target = random.chance(0.7) ? (holder() ?? random.pick(live)) : random.pick(live);
      actions.gracefulRestart += 1;
      const tag = target.tag;
      const result = await target.terminate((SHUTDOWN_GRACE_S + 15) * 1000);
      log(`SIGTERM ${tag}: exit ${result ? (result.code ?? result.signal) : 'timed out'}`);
      if (result === null)
        violation(`${tag} did not finish its graceful shutdown within the grace period + 15 s`);
      restartLater(target, random.integer(100, 2_000));
    } else if (roll < 0.84) {
      const duration = Math.round(LEASE_TTL_S * 1000 * (1.3 + random.next() * 0.9));
      actions.partitions += 1;
      log(`partition for ${duration} ms (lease TTL ${LEASE_TTL_S * 1000} ms)`);
      proxy.partitionFor(duration);
    } else {
      actions.quiet += 1;
    }
  }

  // ------------------------------------------------------------ the end

  log('chaos over: faults off, partition ended, replicas restarted');
  proxy.setPartition(false);
  proxy.setSchedule({ rules: [] });
  await Promise.all([...pendingRestarts]);
  for (const replica of replicas) if (!replica.alive) await replica.start();
  while (reportedExits < unexpectedExits.length) {
    const exit = unexpectedExits[reportedExits]!;
    reportedExits += 1;
    violation(
      `replica ${exit.tag} exited by itself (${exit.code ?? exit.signal}); its log ends:\n${exit.logTail}`,
    );
  }

  writerStopping = true;
  writer.kill('SIGTERM');
  await writerExited;
  const writerStats = writerOut.trim() ? (JSON.parse(writerOut.trim()) as WriterStats) : undefined;
  const writerRecords = readFileSync(recordsPath, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { commit: number; hash: string });
  const commitOfHash = new Map(writerRecords.map((entry) => [entry.hash, entry.commit]));
  const lastWriterCommit = writerRecords[writerRecords.length - 1]!.commit;
  log(`writer stopped after ${lastWriterCommit} commits`);

  // Let a holder establish itself (a takeover needs up to a TTL), then stop
  // both gracefully: the holder ships everything and writes a final manifest.
  const holderDeadline = Date.now() + (LEASE_TTL_S * 3 + 10) * 1000;
  for (;;) {
    const found = await readLease(judgeStore, prefix).catch(() => null);
    const fresh =
      found && !found.record.released && Date.now() - found.record.renewedAt < LEASE_TTL_S * 1000;
    if (fresh && holder()) break;
    if (Date.now() > holderDeadline) {
      violation(`no replica held the lease within ${LEASE_TTL_S * 3 + 10} s after the chaos ended`);
      break;
    }
    await sleep(200);
  }
  await sleep(2_000);
  const finalHolder = holder()?.tag ?? '(none)';
  const exits = await Promise.all(
    replicas.map(async (replica) => ({
      tag: replica.tag,
      result: await replica.terminate((SHUTDOWN_GRACE_S + 15) * 1000),
    })),
  );
  for (const { tag, result } of exits) {
    if (result === null) violation(`${tag} did not exit within the grace period + 15 s of SIGTERM`);
    else if (result.code !== 0)
      violation(`${tag} exited ${result.code ?? result.signal} after SIGTERM (faults were off)`);
  }
  log(
    `replicas stopped (holder was ${finalHolder}): ${exits.map(({ tag, result }) => `${tag} exit ${result ? (result.code ?? result.signal) : 'timeout'}`).join(', ')}`,
  );
  watchingLease = false;
  await leaseWatcher;
  clearInterval(walSampler);
  clearInterval(rssSampler);

  await verifyAndRecord('the final shutdown');
  const finalList = parseJsonOutput<RestorePoint[]>(
    await runBackupd(['ls', directUrl, '--json'], env),
    'final ls',
  );
  const finalCovered = covered(finalList);
  const lost = difference(everCovered, finalCovered);
  const finalMax = Math.max(-1, ...finalList.map((point) => point.commitSeq));
  if (lost.length > 0)
    violation(
      `commits covered by a restore point during the run are no longer restorable: ${format(lost)}`,
    );
  if (finalMax < highWater)
    violation(`the newest restore point (${finalMax}) is below the high-water mark ${highWater}`);

  // Restores: LATEST and 20 random commits, none strictly inside a
  // compacted object (restorable only at its end, by design).
  const restoreDirectory = join(workDirectory, 'restores');
  await mkdir(restoreDirectory);
  const compaction = await compactionOf(finalList, judgeStore, prefix);
  const exact = difference(finalCovered, compaction.interiors);
  const sampled = random.sample(members(exact), RESTORES).sort((a, b) => a - b);
  const jobs: { commit: number | 'LATEST' }[] = [
    { commit: 'LATEST' },
    ...sampled.map((commit) => ({ commit })),
  ];
  const restored: RestoreOutcome[] = [];
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next;
      next += 1;
      restored.push(
        await restoreAndCompare(
          jobs[index]!.commit,
          index,
          restoreDirectory,
          directUrl,
          env,
          commitOfHash,
        ),
      );
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  let restoresVerified = 0;
  for (const outcome of restored) {
    if (outcome.problem) violation(outcome.problem);
    else restoresVerified += 1;
  }
  // Order and exactness of the mapping (commit-mapping.ts).
  // Each restore's generation is that of the manifest it came from.
  const generationOf = new Map(finalList.map((point) => [point.manifestKey, point.walGeneration]));
  const mapped: MappedRestore[] = [];
  for (const outcome of restored)
    if (
      outcome.writerCommit !== undefined &&
      outcome.commitSeq !== undefined &&
      outcome.manifestKey !== undefined
    )
      mapped.push({
        commitSeq: outcome.commitSeq,
        manifestKey: outcome.manifestKey,
        writerCommit: outcome.writerCommit,
      });
  for (const problem of commitMappingViolations(
    mapped,
    generationOf,
    continuationPoints(logDirectory),
  ))
    violation(problem);
  // Commit numbers must name one state: no two generations may claim the same commit.
  violations.push(
    ...(await generationOverlaps(finalList, judgeStore, prefix, restoreDirectory, commitOfHash)),
  );
  const latest = restored.find((outcome) => outcome.label === 'LATEST');
  if (latest?.writerCommit !== undefined && latest.writerCommit !== lastWriterCommit)
    violation(
      `LATEST holds writer commit ${latest.writerCommit} but the writer's last commit is ${lastWriterCommit}: the final graceful shutdown did not ship ${lastWriterCommit - latest.writerCommit} commit(s)`,
    );

  // Exclusion, from the write log.
  const writeLog = proxy.writeLog();
  const exclusion = checkExclusion(writeLog, leasePath);
  for (const finding of exclusion.violations.slice(0, 10)) violation(describeFinding(finding));
  if (exclusion.violations.length > 10)
    violation(`… and ${exclusion.violations.length - 10} more exclusion violations`);
  for (const finding of exclusion.overlaps.slice(0, 5)) notes.push(describeFinding(finding));

  // ------------------------------------------------------------ summary

  const kills = replicas.reduce((sum, replica) => sum + replica.kills, 0);
  const counts = proxy.counts();
  const lines = [
    '',
    '================ soak summary ================',
    `seed ${seed}, ${minutes} min (chaos ${Math.round(chaosMs / 1000)} s), total ${Math.round((Date.now() - startedAt) / 1000)} s, server versitygw ${s3.version}`,
    `faults injected: ${Object.entries(counts)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(', ')} (partition counts requests held); partitions started ${actions.partitions}`,
    `requests through the proxy: ${proxy.requests()}, writes ${writeLog.length} (${writeLog.filter((entry) => entry.lost).length} with the answer lost)`,
    `kills (SIGKILL): ${kills} — holder ${actions.killHolder}, other ${actions.killOther}, both ${actions.killBoth}; graceful restarts ${actions.gracefulRestart}; incarnations ${replicas.map((replica) => `${replica.name}×${replica.starts}`).join(', ')}`,
    `takeovers: lease generation ${leaseWatch.firstGeneration} -> ${leaseWatch.lastGeneration} (${leaseWatch.increments} increments seen); lease-writer changes in the write log ${Math.max(0, exclusion.acquisitions - 1)}`,
    `exclusion: ${exclusion.leaseWrites} lease writes, ${exclusion.dataWrites} data writes (${Object.entries(
      exclusion.writesByCaller,
    )
      .map(([caller, count]) => `${caller} ${count}`)
      .join(
        ', ',
      )}); violations ${exclusion.violations.length}, in-flight overlaps ${exclusion.overlaps.length}`,
    `checks (verify --deep + ls): ${checks}; restore points at the end ${finalList.length}, covering ${size(finalCovered)} commits (${format(finalCovered, 4)}); high-water ${highWater}`,
    `writer: ${lastWriterCommit} commits; checkpoints ${
      writerStats
        ? Object.entries(writerStats.checkpoints)
            .map(([mode, c]) => `${mode} ${c.calls} (busy ${c.busy}, errors ${c.errors})`)
            .join(', ')
        : '(no statistics)'
    }`,
    `restores verified: ${restoresVerified} of ${restored.length} (LATEST = backupd commit ${latest?.commitSeq ?? '?'} = writer commit ${latest?.writerCommit ?? '?'} of ${lastWriterCommit})`,
    `compaction ${COMPACTION}: compacted objects named by the final restore points ${compaction.objects} (${compaction.levels}); commits restorable only at a compaction boundary ${size(compaction.interiors)}`,
    `commits lost: ${size(lost)}`,
    `peak WAL size: ${(peakWalBytes / 1024 / 1024).toFixed(2)} MiB; peak replica RSS ${Object.entries(
      peakRssBytes,
    )
      .map(([name, bytes]) => `${name} ${(bytes / 1024 / 1024).toFixed(0)} MiB`)
      .join(', ')}`,
    `replicas that exited by themselves: ${unexpectedExits.length}`,
  ];
  if (notes.length > 0) lines.push('notes:', ...notes.map((note) => `  ${note}`));
  if (violations.length > 0)
    lines.push(`violations (${violations.length}):`, ...violations.map((text) => `  - ${text}`));
  lines.push('==============================================');
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** The lost-commit check must be able to fail: a commit dropped from the end state is found. */
function selfTestCoverage(): string | null {
  const before = merge([
    [0, 10],
    [12, 20],
  ]);
  const after = merge([
    [0, 4],
    [6, 10],
    [12, 20],
  ]);
  const lost = difference(before, after);
  if (size(lost) !== 1 || lost[0]?.[0] !== 5) return 'the lost-commit check misses a lost commit';
  if (size(difference(after, before)) !== 0) return 'the lost-commit check flags a kept commit';
  // Commits 16..19 sit strictly inside the compacted entry (14..20 after a
  // snapshot of 13): only they are left out of the sampled restores.
  const inside = compactedInteriors(
    {
      oldestCommitSeq: 10,
      files: [{ frames: 3 }],
      segments: [
        { key: 'fine', frames: 2 },
        { key: 'compacted', frames: 5 },
        { key: 'fine', frames: 1 },
      ],
    },
    (key) => key === 'compacted',
  );
  if (format(inside) !== '16..19') return `compacted interiors are ${format(inside)}, not 16..19`;
  return null;
}

// ---------------------------------------------------------------- restores

/**
 * The compacted objects the healthy restore points name, by level, and the
 * commits strictly inside them (each read from its manifest on the server).
 */
async function compactionOf(
  points: readonly RestorePoint[],
  store: S3Store,
  prefix: string,
): Promise<{ objects: number; levels: string; interiors: Interval[] }> {
  const byLevel = new Map<number, Set<string>>();
  const interiors: Interval[] = [];
  const levelOf = (key: string) => {
    const parsed = parseSegmentKey(prefix, key);
    return parsed?.layout === 'compacted' ? parsed.level : undefined;
  };
  for (const point of points) {
    if (point.status !== 'ok') continue;
    const object = await store.get(point.manifestKey);
    if (object === null) continue;
    const manifest = parseManifest(object.body, { prefix });
    for (const segment of manifest.segments) {
      const level = levelOf(segment.key);
      if (level !== undefined)
        byLevel.set(level, (byLevel.get(level) ?? new Set()).add(segment.key));
    }
    interiors.push(...compactedInteriors(manifest, (key) => levelOf(key) !== undefined));
  }
  const levels = [...byLevel.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([level, keys]) => `level ${level}: ${keys.size}`);
  return {
    objects: [...byLevel.values()].reduce((n, keys) => n + keys.size, 0),
    levels: levels.join(', ') || 'none',
    interiors: merge(interiors),
  };
}

interface RestoreOutcome {
  readonly label: string;
  readonly commitSeq?: number;
  readonly manifestKey?: string;
  readonly writerCommit?: number;
  readonly problem?: string;
}

async function restoreAndCompare(
  commit: number | 'LATEST',
  index: number,
  directory: string,
  url: string,
  env: Env,
  commitOfHash: ReadonlyMap<string, number>,
): Promise<RestoreOutcome> {
  const label = commit === 'LATEST' ? 'LATEST' : `commit ${commit}`;
  const target = join(directory, `r${index}-${commit}`, 'restored.db');
  await mkdir(join(directory, `r${index}-${commit}`));
  const args = ['restore', url, target, '--json'];
  if (commit !== 'LATEST') args.push('--commit', String(commit));
  const result = await runBackupd(args, env);
  if (result.code !== 0)
    return {
      label,
      problem: `restore of ${label} failed (exit ${result.code ?? result.signal}): ${lastLines(result.stderr, 6)}`,
    };
  let commitSeq: number;
  let manifestKey: string;
  try {
    ({ commitSeq, manifestKey } = parseJsonOutput<{ commitSeq: number; manifestKey: string }>(
      result,
      `restore of ${label}`,
    ));
  } catch (error) {
    return { label, problem: (error as Error).message };
  }
  if (commit !== 'LATEST' && commitSeq !== commit)
    return { label, commitSeq, problem: `restore of ${label} reported commit ${commitSeq}` };
  if (!existsSync(target))
    return { label, commitSeq, problem: `restore of ${label} left no database at ${target}` };
  const { integrity, writerCommit } = inspect(target, commitOfHash);
  if (integrity !== 'ok')
    return { label, commitSeq, problem: `restored ${label}: integrity_check says ${integrity}` };
  if (writerCommit === undefined)
    return {
      label,
      commitSeq,
      problem: `restored ${label} (backupd commit ${commitSeq}, ${manifestKey}) equals none of the writer's commits`,
    };
  return { label, commitSeq, manifestKey, writerCommit };
}

/** What a restored database holds: integrity verdict and the writer commit its content equals. */
function inspect(
  path: string,
  commitOfHash: ReadonlyMap<string, number>,
): { integrity: string; writerCommit: number | undefined } {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const rows = database.prepare('PRAGMA integrity_check').all() as Record<string, unknown>[];
    const integrity = rows.map((row) => Object.values(row)[0]).join('; ');
    return { integrity, writerCommit: commitOfHash.get(contentHash(database)) };
  } finally {
    database.close();
  }
}

/**
 * Two WAL generations whose restore points claim the same commit numbers.
 * `restore --commit N` then picks one of them, so a commit number would not
 * name one state. For each such pair, the first shared commit is restored
 * from both (through the library, which can name the manifest and the commit
 * together) to show what each holds.
 */
async function generationOverlaps(
  points: readonly RestorePoint[],
  store: S3Store,
  prefix: string,
  directory: string,
  commitOfHash: ReadonlyMap<string, number>,
): Promise<string[]> {
  const generations = new Map<number, { from: number; to: number; manifest: string }>();
  for (const point of points) {
    if (point.status !== 'ok' || point.walGeneration === undefined) continue;
    const from = point.restorableFrom ?? point.commitSeq;
    const known = generations.get(point.walGeneration);
    if (!known || point.commitSeq > known.to)
      generations.set(point.walGeneration, {
        from: Math.min(from, known?.from ?? from),
        to: point.commitSeq,
        manifest: point.manifestKey,
      });
    else known.from = Math.min(known.from, from);
  }
  const ordered = [...generations.entries()].sort((a, b) => a[0] - b[0]);
  const found: string[] = [];
  for (let i = 0; i < ordered.length; i += 1)
    for (let j = i + 1; j < ordered.length; j += 1) {
      const [g1, a] = ordered[i]!;
      const [g2, b] = ordered[j]!;
      const start = Math.max(a.from, b.from);
      const end = Math.min(a.to, b.to);
      if (start > end) continue;
      const held: string[] = [];
      for (const [generation, manifest] of [
        [g1, a.manifest],
        [g2, b.manifest],
      ] as const) {
        const target = join(directory, `overlap-${generation}-${start}`);
        try {
          await restore(store, prefix, target, {
            target: { kind: 'restore-point', manifestKey: manifest, commitSeq: start },
            materializer: sqliteMaterializer({ databaseName: 'restored.db' }),
          });
          const { integrity, writerCommit } = inspect(join(target, 'restored.db'), commitOfHash);
          held.push(
            `generation ${generation} holds writer commit ${writerCommit ?? '(none of them)'}${integrity === 'ok' ? '' : ` (integrity: ${integrity})`}`,
          );
        } catch (error) {
          held.push(`generation ${generation}: restore failed: ${(error as Error).message}`);
        }
      }
      found.push(
        `WAL generations ${g1} (${a.from}..${a.to}) and ${g2} (${b.from}..${b.to}) both claim commits ${start}..${end}; at commit ${start}: ${held.join(', ')}`,
      );
    }
  for (const text of found) log(`VIOLATION: ${text}`);
  return found;
}

// ---------------------------------------------------------------- shapes

interface VerifyJson {
  readonly ok: boolean;
  readonly latest: {
    readonly manifestKey: string | null;
    readonly ok: boolean;
    readonly problems: readonly { message: string }[];
  };
  readonly manifests: readonly {
    key: string;
    status: string;
    problems: readonly { message: string }[];
  }[];
  readonly problems: readonly { message: string }[];
}

function describeVerify(report: VerifyJson): string {
  const parts: string[] = [];
  for (const problem of report.latest.problems) parts.push(`LATEST: ${problem.message}`);
  for (const manifest of report.manifests)
    for (const problem of manifest.problems) parts.push(`${manifest.key}: ${problem.message}`);
  for (const problem of report.problems) parts.push(`prefix: ${problem.message}`);
  return parts.slice(0, 6).join('; ') || '(no problem listed)';
}

interface WriterStats {
  readonly commits: number;
  readonly checkpoints: Record<string, { calls: number; busy: number; errors: number }>;
}

// ---------------------------------------------------------------- entry

let outcome: string;
try {
  await main();
  outcome =
    violations.length === 0
      ? 'ok'
      : `FAILED (${firstLine(violations[0]!)}${violations.length > 1 ? ` and ${violations.length - 1} more` : ''})`;
} catch (error) {
  outcome =
    error instanceof SoakAbort
      ? `FAILED (${error.message})`
      : `FAILED (the soak itself broke: ${(error as Error).stack ?? String(error)})`;
  for (const child of children) child.kill('SIGKILL');
}
await proxy?.close().catch(() => undefined);
if ((outcome !== 'ok' || setting('SOAK_KEEP')) && servers && workDirectory) {
  // Keep the bucket for the post-mortem: versitygw's posix backend stores
  // each object as a file under <root>/<bucket>/<key>.
  await cp(join(servers.workDirectory, 'versitygw'), join(workDirectory, 'bucket'), {
    recursive: true,
  }).catch(() => undefined);
}
await servers?.stop().catch(() => undefined);
if (outcome === 'ok' && workDirectory && !setting('SOAK_KEEP'))
  await rm(workDirectory, { recursive: true, force: true });
else if (workDirectory) process.stdout.write(`logs and database kept in ${workDirectory}\n`);
process.stdout.write(`soak: ${outcome}\n`);
process.exit(outcome === 'ok' ? 0 : 1);

function firstLine(text: string): string {
  return text.split('\n')[0]!;
}

/** Where replicas continued a generation, from every replica log in `logDirectory` (commit-mapping.ts). */
function continuationPoints(logDirectory: string): Map<number, number[]> {
  const lines: string[] = [];
  for (const name of readdirSync(logDirectory))
    if (name.endsWith('.log'))
      lines.push(...readFileSync(join(logDirectory, name), 'utf8').split('\n'));
  return continuationPointsOf(lines);
}
