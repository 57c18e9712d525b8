/**
 * `backupd ls <url> [--deep]`: the restore points in a prefix, each with a
 * STATUS that says what was checked and never more, a PROBLEM line for an
 * unusable LATEST, the restorable window (restorable-window.ts; GRANULARITY is
 * explained in the `description` below) and the data newer than LATEST. In
 * JSON those ride on LATEST's entry, so the array stays an array. A missing
 * local directory is an error (exit 1): it is most often a mistyped path, and
 * "no restore points" would read as a lost backup. In full: the README, "Commands".
 */
import { existsSync } from 'node:fs';
import {
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
  listRestorePoints,
  ObjectKeyError,
  type RestorePointInfo,
  readLatest,
  type UnnamedNewerData,
} from '@x/restore';
import { AGE_IDENTITY_FILE_OPTIONS } from '../cli/age-identity-option.ts';
import { booleanOption, type CommandContextFor, defineCommand } from '../cli/command.ts';
import { UsageError } from '../cli/usage-error.ts';
import { type ListedDatabase, listDirectoryDatabases } from '../directory/directory-listing.ts';
import { commandLineIdentities } from '../encryption-settings.ts';
import { EXIT_OK } from '../exit-codes.ts';
import { formatBytes } from '../format-bytes.ts';
import { parseStoreUrl } from '../store-url.ts';
import { expectPositionals, openUrlArgument, print, printJson, table } from './command-store.ts';
import { restorableWindow, windowJson, windowText } from './restorable-window.ts';
import { newerDataCounts, newerDataJson } from './restore-command.ts';

/** `ls` of a local directory that does not exist. */
export class BackupDirectoryMissingError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'BACKUP_DIRECTORY_MISSING';
  /** The URL or path as given. */
  readonly url: string;
  /** The directory looked for. */
  readonly directory: string;

  constructor(url: string, directory: string) {
    super(`nothing at ${url}: the directory does not exist`);
    this.name = 'BackupDirectoryMissingError';
    this.url = url;
    this.directory = directory;
  }
}

const options = { deep: booleanOption(), ...AGE_IDENTITY_FILE_OPTIONS } as const;

export const lsCommand = defineCommand({
  name: 'ls',
  synopsis: 'ls <url> [--deep] [--age-identity-file <file>]...',
  summary: 'list restore points',
  usage: 'Usage: backupd ls <url> [--deep] [--age-identity-file <file>]... [--json]',
  description: `Lists restore points: commit, time, size, generation, lineage, which one LATEST
names and whether LATEST is readable. STATUS says what was checked: "manifest
checked" (the manifest passed restore's checks; its objects were not read),
"verified" (--deep: every object it names exists with its size and CRC-32,
as verify --deep checks), or "corrupt: <why>".

RESTORABLE WINDOW, after the table, is what a restore can produce, from the
oldest state a sound restore point restores (its snapshot) to where a
restore of the latest state ends. Each row is a part of that history, oldest
first, with the commit and time at each end. "time unknown" says why: "older
release" (a restore point of manifest format version 1), "not recorded" (a
store that records no times), "in the log" or "in rolled segments" (the time
is only in segments, which ls does not read). The parts:
  older restore points  those whose snapshot is older than the latest
                        restore point's: earlier generations or lineages
  snapshot, fine segments, level N
                        the latest restore point's state and log, run by
                        run: fine segments are not compacted yet, level N
                        is compacted objects of that level
  rolled forward        commits shipped after the restore point in chained
                        segments; a restore of the latest state holds them
GRANULARITY says which states of a part a restore can choose:
  every commit          restore --commit N restores exactly commit N, and
                        --time T the newest commit at or before T (each
                        commit dated to the millisecond when backupd first
                        saw it). In a SQLite backup, commits the replica
                        batched while behind the application restore
                        together, to the batch's end; ls does not show
                        whether any were.
  its one state         the restore point is its snapshot alone.
  ... (fine segments kept)
                        SQLite compacted objects whose fine segments the
                        bucket still holds (exactWindow, 5 min by
                        default): every commit in them restores exactly.
  only at ... end(s), compacted: object ends
                        a SQLite compacted object keeps only the state at
                        its end: the end of a window of its level (30 s,
                        5 min, 1 h by default), or of a merge made before
                        the window ended under a heavy load. Older restore
                        points say "compacted: object ends" when one of
                        them names compacted objects ("SQLite compacted"
                        when the engine is unknown, see below).
  every commit (N objects)
                        a framed store's compacted objects keep every
                        frame: every commit stays exact at every level. A
                        framed store records no times: choose by commit.
  every commit, by --time
                        rolled-forward commits: restore --commit takes
                        only commits a restore point names, --time reaches
                        each one. A framed store's: only its end, which a
                        restore of the latest state gives.
  framed: ...; SQLite: ...
                        the listing cannot tell the engine (version 1
                        restore points beside undated ones): both are said
                        ("SQLite: by --time": every commit, by --time).
Notes under the table, only when they apply: commits in no restore point
between the ends (restore --commit refuses them; --time reaches them only
if they were shipped in segments chained to a restore point below them), a
restore point above the window that LATEST does not name, more than one
lineage (--commit and --time reach every lineage listed), a roll-forward
that could not be checked (encrypted segments past LATEST need
--age-identity-file, as --deep on encrypted objects does). Corrupt restore points are left out. With --json
the same facts are the "window" object of the LATEST entry (at the top
level when LATEST is unusable): earliest, latest, engine, gaps, lineages,
granularity, rows, notes and text.`,
  options,
  examples: [
    'backupd ls s3://my-bucket/app',
    'backupd ls s3://my-bucket/app --deep',
    'backupd ls file:///srv/app.db-backups --json',
  ],
  run: listRestorePointsCommand,
});

/** A directory's databases, each with its newest restore point. */
function printDirectory(
  context: CommandContextFor<typeof options>,
  databases: readonly ListedDatabase[],
  deep: boolean,
): number {
  if (deep)
    throw new UsageError(
      `${databases.length} databases are backed up below this URL: --deep checks one, give its URL (backupd ls <url>/<database> --deep)`,
    );
  if (context.values.json) {
    printJson(context, { databases });
    return EXIT_OK;
  }
  print(
    context,
    table(
      ['DATABASE', 'COMMIT', 'CREATED', 'URL'],
      databases.map((entry) => [
        entry.database,
        entry.commitSeq === null ? '-' : String(entry.commitSeq),
        entry.problem === null ? (entry.createdAt ?? '-') : `PROBLEM: ${entry.problem}`,
        entry.url,
      ]),
    ),
  );
  print(
    context,
    `${databases.length} databases (replicate --dir); the restore points of one: backupd ls <its URL>`,
  );
  return EXIT_OK;
}

/** The STATUS cell of a restore point. */
function statusOf(point: RestorePointInfo): string {
  const status =
    point.status !== 'ok'
      ? `corrupt: ${point.problems.join('; ')}`
      : point.checked === 'objects'
        ? 'verified'
        : 'manifest checked';
  const superseded = point.superseded;
  return superseded === undefined
    ? status
    : `${status}; SUPERSEDED: lease generation ${superseded.leaseGeneration} wrote it after generation ${superseded.successorGeneration} had written ${superseded.successorKey}`;
}

async function listRestorePointsCommand(
  context: CommandContextFor<typeof options>,
): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix, url } = await openUrlArgument(context, 0);
  // openUrlArgument parsed the same text, so this cannot throw here.
  const location = parseStoreUrl(url);
  if (location.scheme === 'file' && !existsSync(location.root))
    throw new BackupDirectoryMissingError(url, location.root);
  const signal = AbortSignal.timeout(120_000);
  const identities = commandLineIdentities({
    files: context.values['age-identity-file'],
    env: context.env,
    cwd: context.cwd,
  });
  const latest = await readLatest(store, prefix, signal);
  const deep = context.values.deep ?? false;
  const points = await listRestorePoints(store, prefix, { signal, deep, identities });
  if (latest.state === 'missing' && points.length === 0) {
    // No backup of its own: the URL of a directory's databases (replicate --dir)?
    const databases = await listDirectoryDatabases(store, prefix, location, signal);
    if (databases.length > 0) return printDirectory(context, databases, deep);
  }
  const named = points.find((point) => point.latest);
  const latestProblem =
    latest.state === 'invalid'
      ? latest.problem
      : latest.state === 'ok' && named === undefined
        ? `LATEST names ${latest.manifestKey}, which does not exist`
        : named !== undefined && named.status !== 'ok'
          ? `LATEST names ${named.manifestKey}, which is corrupt: ${named.problems.join('; ')}`
          : latest.state === 'missing' && points.length > 0
            ? 'LATEST does not exist'
            : undefined;
  // Where a restore of the latest state goes instead: the newest sound point.
  const fallback =
    latestProblem === undefined
      ? undefined
      : points.findLast((point) => point.status === 'ok' && !point.latest);
  // What a restore of the latest would leave out: measured against the
  // restore point LATEST names, when it is readable.
  const latestPoint = points.find((point) => point.latest && point.status === 'ok');
  let newer: UnnamedNewerData | null = null;
  let newerProblem: string | undefined;
  // Encrypted segments past the restore point, and no identity to read them with.
  let lockedRollForward = false;
  if (latestPoint !== undefined) {
    try {
      // Measured after the roll-forward a restore of the latest state does.
      newer = await findUnnamedNewerDataAfter(store, prefix, latestPoint.manifestKey, {
        signal,
        afterRollForward: true,
        identities,
      });
    } catch (error) {
      if (ObjectKeyError.isInstance(error) && identities.length === 0) lockedRollForward = true;
      // The listing above is still true; say that this part is unknown
      // instead of failing the whole command.
      newerProblem = error instanceof Error ? error.message : String(error);
    }
  }
  const restorable = restorableWindow(
    points,
    latestPoint ?? fallback,
    latestPoint !== undefined
      ? rolledCommits(newer, newerProblem)
      : await fallbackRolledCommits(fallback, (key) =>
          findUnnamedNewerDataAfter(store, prefix, key, {
            signal,
            afterRollForward: true,
            identities,
          }),
        ),
  );
  if (context.values.json) {
    // The fields ride on the LATEST entry, so the output keeps its shape.
    const listed = points.map((point) =>
      point !== latestPoint
        ? point
        : newerProblem !== undefined
          ? { ...point, newerUnrestorableCheckError: newerProblem, window: windowJson(restorable) }
          : {
              ...point,
              newerUnrestorable: newer === null ? null : newerDataJson(newer),
              ...(newer?.rolledForward !== undefined && newer.rolledForward.commits > 0
                ? { rolledForward: newer.rolledForward }
                : {}),
              window: windowJson(restorable),
            },
    );
    printJson(
      context,
      latestProblem
        ? {
            latestProblem,
            latestFallback:
              fallback === undefined
                ? null
                : { manifestKey: fallback.manifestKey, commitSeq: fallback.commitSeq },
            restorePoints: listed,
            window: windowJson(restorable),
          }
        : listed,
    );
    return EXIT_OK;
  }
  if (latestProblem) {
    print(context, `PROBLEM: ${latestProblem}`);
    if (points.length > 0)
      print(
        context,
        fallback === undefined
          ? 'PROBLEM: no restore point below is sound: a restore of the latest state fails'
          : `a restore of the latest state falls back to commit ${fallback.commitSeq} (${fallback.manifestKey}), the newest restore point listed as sound`,
      );
  }
  if (points.length === 0) {
    print(context, 'no restore points');
    return EXIT_OK;
  }
  const rows = points.map((point) => [
    point.latest ? '*' : '',
    point.restorableFrom !== undefined && point.restorableFrom !== point.commitSeq
      ? `${point.restorableFrom}..${point.commitSeq}`
      : String(point.commitSeq),
    point.createdAt ?? '-',
    timeRange(point),
    point.sizeBytes !== undefined ? formatBytes(point.sizeBytes) : '-',
    point.walGeneration !== undefined ? String(point.walGeneration) : '-',
    point.lineage ?? '-',
    statusOf(point),
  ]);
  print(
    context,
    table(
      ['LATEST', 'COMMITS', 'CREATED', 'STATE TIMES', 'SIZE', 'GENERATION', 'LINEAGE', 'STATUS'],
      rows,
    ),
  );
  if (points.some((point) => point.formatVersion === 1))
    print(
      context,
      'STATE TIMES "-": a restore point of manifest format version 1 records no state times (its commits were recorded before CREATED)',
    );
  if (!deep)
    print(
      context,
      '"manifest checked": the manifest was read and passed restore\'s checks; its objects were not read (ls --deep reads them)',
    );
  // Above NEWER DATA and ROLL-FORWARD: those stay the last lines, detailing what lies past the restore point.
  print(context, windowText(restorable));
  if (lockedRollForward)
    print(
      context,
      'the segments past LATEST are encrypted: give --age-identity-file to see how far a restore of the latest state reaches',
    );
  else if (newerProblem !== undefined)
    print(context, `PROBLEM: could not check for data newer than LATEST: ${newerProblem}`);
  else if (newer !== null && holdsUnnamedNewerData(newer)) print(context, newerDataLine(newer));
  if (newer?.rolledForward !== undefined && newer.rolledForward.commits > 0)
    print(
      context,
      `ROLL-FORWARD: a restore of the latest state also holds ${newer.rolledForward.commits} commit(s) shipped after LATEST's restore point (commit ${newer.commitSeq}), in ${newer.rolledForward.segments} chained segment(s)`,
    );
  return EXIT_OK;
}

/** Commits the latest state rolls forward over past LATEST's point; `null` when not known. */
function rolledCommits(newer: UnnamedNewerData | null, problem: string | undefined): number | null {
  if (problem !== undefined || newer === null) return null;
  return newer.rolledForward?.commits ?? 0;
}

/**
 * The same for the restore point a restore falls back to when LATEST is
 * unusable: restore rolls forward from it too. A failure leaves it unknown
 * (the window says so) rather than failing the listing.
 */
async function fallbackRolledCommits(
  fallback: RestorePointInfo | undefined,
  find: (manifestKey: string) => Promise<UnnamedNewerData | null>,
): Promise<number | null> {
  if (fallback === undefined) return 0;
  try {
    return rolledCommits(await find(fallback.manifestKey), undefined);
  } catch {
    return null;
  }
}

/** The STATE TIMES cell: the oldest state's time..the newest commit's, as far as known. */
function timeRange(point: RestorePointInfo): string {
  const from = point.snapshotTime ?? null;
  const to = point.commitTime ?? null;
  if (from === null && to === null) return '-';
  if (from === to) return from!;
  return `${from ?? '?'}..${to ?? '?'}`;
}

/** The line after the table when data newer than LATEST's restore point exists. */
function newerDataLine(found: UnnamedNewerData): string {
  const where =
    found.newerRestorePoints === 0
      ? 'they are in no restore point; a restore of the latest leaves them out'
      : `LATEST does not name them; ${found.newerRestorePoints} restore point(s) above commit ${found.commitSeq} exist`;
  return `NEWER DATA: ${newerDataCounts(found)} shipped after LATEST's restore point (commit ${found.commitSeq}); ${where}`;
}
