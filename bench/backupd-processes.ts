/**
 * The `backupd` command as an operator runs it, for the benchmarks that
 * measure end to end: `replicate` as a process of its own, `ls` and `restore`
 * as one-shot processes, and what a `file://` prefix holds. Not a benchmark
 * (no `benchmark` export): imported by `sqlite-growth` and `sqlite-app-overhead`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseLatest, parseManifest, parseManifestKey } from '@x/manifest';
import type { FsStore } from '@x/store';
import type { Measurement } from './harness.ts';

/** The installed command (the bundle when fresh, else the sources: see apps/backupd/bin). */
export const BACKUPD_BIN = fileURLToPath(new URL('../node_modules/.bin/backupd', import.meta.url));

/** The prefix `backupd` uses inside a `file://` directory. */
export const FILE_URL_PREFIX = 'backup';

/** Throws unless the command runs on this machine. */
export function checkBackupdRuns(): void {
  const probe = spawnSync(BACKUPD_BIN, ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`backupd does not run: ${probe.stderr}`);
}

/** Event names each replicate started here has logged (its JSON log lines at level info). */
const loggedEvents = new WeakMap<ChildProcess, Set<string>>();

/**
 * Where every replicate's log lines also go when `BENCH_REPLICATE_LOG` names
 * a file (appended, one line per log line, each replicate's lines prefixed
 * with its process id): to read afterwards why a run did what it did.
 */
const REPLICATE_LOG = process.env.BENCH_REPLICATE_LOG;

/**
 * CPU seconds (user + system, all threads) a live process has used so far,
 * from `/proc/<pid>/stat`; `null` where there is no such file (not Linux, or
 * the process is gone).
 */
export function cpuSecondsOf(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may hold spaces), closed by ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime: fields 14 and 15 of the line, 12 and 13 here, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * `backupd replicate <database> <url>` with this process's environment (so
 * every `BACKUPD_*` setting given reaches it), logging at level info in JSON;
 * the events it logs are kept for {@link hasLogged} and
 * {@link waitForEvent}, and an unexpected exit is reported on stderr with
 * the command's last words.
 */
export function startReplicate(database: string, url: string): ChildProcess {
  const child = spawn(
    BACKUPD_BIN,
    ['replicate', database, url, '--log-level', 'info', '--log-format', 'json'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const events = new Set<string>();
  loggedEvents.set(child, events);
  let stderr = '';
  let partial = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stderr = (stderr + text).slice(-4000);
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    if (REPLICATE_LOG !== undefined && lines.length > 0)
      appendFileSync(REPLICATE_LOG, lines.map((line) => `${child.pid} ${line}\n`).join(''));
    for (const line of lines) {
      try {
        const event = (JSON.parse(line) as { event?: unknown }).event;
        if (typeof event === 'string') events.add(event);
      } catch {
        // Not a log line.
      }
    }
  });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null)
      process.stderr.write(`replicate exited ${code}: ${stderr}\n`);
  });
  return child;
}

/** Waits (up to 60 s) until `child` has logged one of `events`; returns which. */
/** Whether `child` has logged `event` so far. */
export function hasLogged(child: ChildProcess, event: string): boolean {
  return loggedEvents.get(child)?.has(event) ?? false;
}

export async function waitForEvent(
  child: ChildProcess,
  events: readonly string[],
): Promise<string> {
  for (let i = 0; i < 600; i++) {
    const seen = loggedEvents.get(child);
    const found = events.find((event) => seen?.has(event));
    if (found !== undefined) return found;
    if (child.exitCode !== null)
      throw new Error(`replicate exited ${child.exitCode} before ${events.join(' or ')}`);
    await sleep(100);
  }
  throw new Error(`replicate logged none of ${events.join(', ')} within 60 s`);
}

/** SIGTERM (the graceful stop: a final restore point), then waits for the exit. */
export async function stopProcess(
  child: ChildProcess,
  signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM',
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

export interface ListedPoint {
  readonly manifestKey: string;
  readonly commitSeq: number;
}

/** `backupd ls <url> --json`: the restore points (none when the command fails). */
export function listRestorePoints(url: string): ListedPoint[] {
  const listed = spawnSync(BACKUPD_BIN, ['ls', url, '--json'], { encoding: 'utf8' });
  if (listed.status !== 0) return [];
  // A plain list, or an object with `restorePoints` when LATEST has a problem.
  const parsed = JSON.parse(listed.stdout) as ListedPoint[] | { restorePoints: ListedPoint[] };
  return Array.isArray(parsed) ? parsed : parsed.restorePoints;
}

/** Waits (up to 60 s) until `ls` shows a restore point not in `known`. */
export async function waitForNewRestorePoint(
  url: string,
  known: readonly ListedPoint[],
): Promise<void> {
  const keys = new Set(known.map((point) => point.manifestKey));
  for (let i = 0; i < 600; i++) {
    if (listRestorePoints(url).some((point) => !keys.has(point.manifestKey))) return;
    await sleep(100);
  }
  throw new Error(`no new restore point at ${url} within 60 s`);
}

/** `backupd restore <url> <target> --force`: its wall time in seconds. */
export function restoreSeconds(url: string, target: string): number {
  const started = process.hrtime.bigint();
  const restored = spawnSync(BACKUPD_BIN, ['restore', url, target, '--force'], {
    encoding: 'utf8',
  });
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  if (restored.status !== 0)
    throw new Error(`restore exited ${restored.status}: ${restored.stderr}`);
  return elapsed;
}

/** Bytes of every object under the prefix, and of the largest restore point (manifest). */
export async function prefixBytes(
  store: FsStore,
): Promise<{ total: number; largestManifest: number }> {
  const { objects } = await store.list(`${FILE_URL_PREFIX}/`);
  let total = 0;
  let largestManifest = 0;
  for (const object of objects) {
    total += object.size;
    if (parseManifestKey(FILE_URL_PREFIX, object.key) !== undefined)
      largestManifest = Math.max(largestManifest, object.size);
  }
  return { total, largestManifest };
}

/** What a restore of the latest state downloads: LATEST, its manifest, and every object it names. */
export async function latestRestoreBytes(store: FsStore): Promise<number> {
  const latest = await store.get(`${FILE_URL_PREFIX}/LATEST`);
  if (latest === null) throw new Error('no restore point yet (LATEST is missing)');
  const manifestKey = parseLatest(latest.body, { prefix: FILE_URL_PREFIX });
  const object = await store.get(manifestKey);
  if (object === null) throw new Error(`LATEST names ${manifestKey}, which is missing`);
  const manifest = parseManifest(object.body, { prefix: FILE_URL_PREFIX });
  const named = [...manifest.files, ...manifest.segments].reduce((sum, o) => sum + o.size, 0);
  return latest.size + object.size + named;
}

/** A measurement where less is better (bytes, seconds, ratios of cost). */
export function lowerIsBetter(value: number, unit: string): Measurement {
  return { value, unit, higherIsBetter: false };
}

/** `path` as an empty directory: whatever an earlier run left there is removed. */
export async function freshDirectory(path: string): Promise<string> {
  await rm(path, { recursive: true, force: true });
  await mkdir(path, { recursive: true });
  return path;
}
