/** `backupd restore <url> <target>`: restore a database (or store directory) from a backup. */

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { AgeIdentity } from '@x/age-envelope';
import {
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
  type RolledForward,
  type UnnamedNewerData,
} from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { AGE_IDENTITY_FILE_OPTIONS } from '../cli/age-identity-option.ts';
import {
  booleanOption,
  type CommandContextFor,
  choiceOption,
  defineCommand,
  stringOption,
  UsageError,
} from '../cli/command.ts';
import { commandLineIdentities } from '../encryption-settings.ts';
import { EXIT_DATABASE_IN_USE, EXIT_OK, EXIT_REFUSED } from '../exit-codes.ts';
import { type ProgressState, progressReporter } from '../progress-bar.ts';
import { describeLockHolder, inspectDatabaseLock } from '../replicate/database-lock.ts';
import { isNothingBackedUp } from '../replicate/nothing-backed-up.ts';
import {
  type DatabaseRestoreOptions,
  type DatabaseRestoreResult,
  type DatabaseRestoreTarget,
  restoreDatabase,
} from '../restore-database.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './command-store.ts';
import { printRestorePlan } from './restore-plan-output.ts';

const options = {
  commit: stringOption({
    argument: '<N>',
    description: 'restore exactly to commit N',
    parse: parseCommitSeq,
  }),
  time: stringOption({
    argument: '<T>',
    description:
      'restore the newest commit at or before T (RFC 3339 with Z or an offset, e.g. 2026-11-29T08:00:00Z)',
    parse: parseRestoreTime,
  }),
  manifest: stringOption({
    argument: '<KEY>',
    description: 'restore the restore point stored at KEY',
  }),
  'if-missing': booleanOption({ description: 'do nothing (exit 0) when <target> already exists' }),
  'if-replica-exists': booleanOption({
    description: 'do nothing (exit 0) when nothing was backed up at <url> yet',
  }),
  force: booleanOption({ description: 'overwrite an existing <target>' }),
  'dry-run': booleanOption({
    description:
      'print what the restore would download (objects, bytes) and the commit it lands on, then exit; nothing is written',
  }),
  type: choiceOption(['sqlite', 'framed'], { description: 'what to restore (default sqlite)' }),
  ...AGE_IDENTITY_FILE_OPTIONS,
} as const;

export const restoreCommand = defineCommand({
  name: 'restore',
  synopsis: 'restore <url> <target>',
  summary: 'restore a database from a backup',
  usage:
    'Usage: backupd restore <url> <target> [--commit N | --time T | --manifest KEY] [--if-missing] [--if-replica-exists] [--force] [--dry-run] [--age-identity-file <file>]... [--json]',
  description: `Restores the newest restore point (or the one chosen) to <target>. Every object
is checked (size and CRC-32) before it is used; files are written atomically.
Encrypted objects open with an identity of one of their recipients
(--age-identity-file).`,
  options,
  examples: [
    'backupd restore s3://my-bucket/app ./restored.db',
    'backupd restore s3://my-bucket/app ./restored.db --commit 1234',
    'backupd restore s3://my-bucket/app ./restored.db --time 2026-11-29T08:00:00Z --dry-run',
    'backupd restore file:///backups/app ./app.db --if-missing',
    'backupd restore s3://my-bucket/app ./app.db --if-missing --if-replica-exists',
    'backupd restore s3://my-bucket/app ./restored.db --age-identity-file /etc/backupd/age-key.txt',
  ],
  run: restoreBackup,
});

/** `--commit`: a whole number. @throws UsageError naming the value. */
export function parseCommitSeq(text: string, flag = '--commit'): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`${flag} must be a whole number, got "${text}"`);
  return Number(text);
}

type RestoreContext = CommandContextFor<typeof options>;

async function restoreBackup(context: RestoreContext): Promise<number> {
  const { target, chosen } = checkArguments(context);
  const identities = commandLineIdentities({
    files: context.values['age-identity-file'],
    env: context.env,
    cwd: context.cwd,
  });
  if (existsSync(target) && context.values['if-missing']) {
    print(context, `${target} exists; nothing restored (--if-missing)`);
    return EXIT_OK;
  }
  if (context.values['dry-run'])
    return printRestorePlan(context, target, {
      target: targetOfFlags(context.values),
      type: context.values.type,
      identities,
    });
  // A restore over a database a live replicate backs up would replace the
  // file under its open connections and its capture (whatever the
  // application then commits lands in a file the backup no longer matches):
  // refused, --force or not, as a second replicate is.
  const lock = inspectDatabaseLock(target);
  if (lock.state === 'held') {
    context.stderr.write(
      context.redactor.text(
        `backupd restore: ${target} is being backed up by a running backupd replicate (${describeLockHolder(lock.files, lock.holder)}); a restore would replace the database under it: stop that replicate first (its lock ${lock.files.lock} is released when it exits)\n`,
      ),
    );
    return EXIT_DATABASE_IN_USE;
  }
  const { store, prefix } = await openUrlArgument(context, 0);
  const progress = progressReporter(context.stderr);
  // Only a restore of the latest promises "everything backed up"; a chosen
  // commit, time or manifest leaves newer data out on purpose. The check
  // starts as soon as the restore point is chosen, beside the downloads.
  const newerCheck =
    chosen.length === 0 ? new EarlyNewerDataCheck(store, prefix, identities) : null;
  try {
    const result = await restoreChosen(context.values, {
      store,
      prefix,
      target,
      identities,
      onProgress: (state) => progress.update(state),
      ...(newerCheck === null ? {} : { onChosen: newerCheck.start }),
    });
    progress.finish();
    const fellBack = result.fellBackFrom ?? null;
    if (fellBack)
      context.stderr.write(
        context.redactor.text(
          `warning: ${fellBack.reason}; restored the newest restore point that passes restore's checks instead\n`,
        ),
      );
    const newer = await newerCheck?.resultFor(result.manifestKey);
    reportRestored(context, target, result, newer);
    if (!context.values.json) print(context, commitTimeLine(result));
    // The restore itself worked: newer data it could not include is a
    // warning, not a failure (README: exit codes).
    return EXIT_OK;
  } catch (error) {
    progress.finish();
    newerCheck?.abandon();
    if (context.values['if-replica-exists'] && (await isNothingBackedUp(error, store, prefix))) {
      print(
        context,
        `nothing was backed up at ${context.positionals[0]} yet; nothing restored (--if-replica-exists)`,
      );
      return EXIT_OK;
    }
    if (!isTargetRefusal(error)) throw error;
    context.stderr.write(
      context.redactor.text(
        `backupd restore: ${error.message}\nuse --force to overwrite, or --if-missing to keep what is there\n`,
      ),
    );
    return EXIT_REFUSED;
  }
}

/** The target, and which of --commit, --time, --manifest were given (at most one). @throws UsageError */
function checkArguments(context: RestoreContext): {
  target: string;
  chosen: readonly string[];
} {
  expectPositionals(context, 2);
  if (context.positionals[0] === undefined) throw new UsageError('missing <url>');
  const targetArgument = context.positionals[1];
  if (targetArgument === undefined) throw new UsageError('missing <target>');
  const chosen = (['commit', 'time', 'manifest'] as const).filter(
    (name) => context.values[name] !== undefined,
  );
  if (chosen.length > 1)
    throw new UsageError(
      `choose one of --commit, --time, --manifest (got ${chosen.map((c) => `--${c}`).join(' and ')})`,
    );
  if (context.values['if-missing'] && context.values.force)
    throw new UsageError('--if-missing and --force contradict each other');
  return { target: resolve(context.cwd, targetArgument), chosen };
}

/** The state --commit, --time or --manifest choose (at most one, checked before); else the latest. */
function targetOfFlags(values: RestoreContext['values']): DatabaseRestoreTarget {
  const { commit: commitSeq, time, manifest: manifestKey } = values;
  if (manifestKey !== undefined) return { kind: 'restore-point', manifestKey };
  if (commitSeq !== undefined) return { kind: 'commit', commitSeq };
  if (time !== undefined) return { kind: 'time', time };
  return { kind: 'latest' };
}

/** Restores the restore point the options choose, as a SQLite database or a framed store directory. */
async function restoreChosen(
  values: RestoreContext['values'],
  where: {
    readonly store: ObjectStore;
    readonly prefix: string;
    readonly target: string;
    readonly identities: readonly AgeIdentity[];
    readonly onProgress: (state: ProgressState) => void;
    readonly onChosen?: DatabaseRestoreOptions['onChosen'];
  },
): Promise<DatabaseRestoreResult> {
  const target = targetOfFlags(values);
  const common = { force: values.force ?? false, onProgress: where.onProgress };
  if ((values.type ?? 'sqlite') === 'sqlite')
    return restoreDatabase(where.store, where.prefix, where.target, {
      ...common,
      target,
      identities: where.identities,
      ...(where.onChosen === undefined ? {} : { onChosen: where.onChosen }),
    });
  if (target.kind === 'time')
    throw new UsageError(
      '--time needs commit times, which only SQLite backups record; use --commit',
    );
  // The framed store records no commit times.
  return {
    ...(await restoreFramedStore(where.store, where.prefix, where.target, {
      ...common,
      target,
      identities: where.identities,
    })),
    commitTime: null,
  };
}

/** The line after the result: the recorded time of the state restored, or that it is unknown. */
function commitTimeLine(result: DatabaseRestoreResult): string {
  return result.commitTime === null
    ? `commit time of commit ${result.commitSeq}: unknown (this backup records none for it)`
    : `commit time of commit ${result.commitSeq}: ${result.commitTime}`;
}

/** What a restore refuses to overwrite: the caller's cue for exit 3. */
function isTargetRefusal(error: unknown): error is Error {
  return (
    error instanceof Error &&
    'code' in error &&
    (error.code === 'RESTORE_TARGET_NOT_EMPTY' || error.code === 'SQLITE_RESTORE_TARGET_EXISTS')
  );
}

/** The result line (or JSON), and on stderr the warning about newer data left out. */
function reportRestored(
  context: RestoreContext,
  target: string,
  result: {
    readonly commitSeq: number;
    readonly manifestKey: string;
    readonly rolledForward?: RolledForward;
  },
  newer: NewerDataCheck | undefined,
): void {
  const rolled = result.rolledForward;
  const rolledNote = rollForwardNote(rolled);
  if (rolledNote !== undefined) context.stderr.write(context.redactor.text(`${rolledNote}\n`));
  if (newer !== undefined) {
    const warning =
      'problem' in newer
        ? `warning: could not check the backup for data newer than the restore point used (commit ${result.commitSeq}): ${newer.problem}`
        : holdsUnnamedNewerData(newer.found)
          ? newerDataWarning(newer.found)
          : undefined;
    if (warning !== undefined) context.stderr.write(context.redactor.text(`${warning}\n`));
  }
  if (!context.values.json) {
    const beyond =
      rolled !== undefined && rolled.commits > 0
        ? ` (${rolled.commits} commit(s) beyond the restore point at commit ${rolled.fromCommitSeq}, rolled forward over ${rolled.segments} chained segment(s))`
        : '';
    print(
      context,
      `restored commit ${result.commitSeq} from ${result.manifestKey}${beyond} to ${target}`,
    );
    return;
  }
  printJson(
    context,
    newer === undefined
      ? result
      : 'problem' in newer
        ? { ...result, newerUnrestorableCheckError: newer.problem }
        : { ...result, newerUnrestorable: newerDataJson(newer.found) },
  );
}

/** RFC 3339 date-time: date, time (seconds and fractions optional), and a zone. */
const TIMESTAMP_WITH_ZONE =
  /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
/** The same without the zone (or a date alone): what a missing zone looks like. */
const TIMESTAMP_WITHOUT_ZONE = /^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$/;

/**
 * `--time`: an RFC 3339 timestamp with `Z` or an explicit offset, as Unix
 * milliseconds. A timestamp without a zone is refused: JavaScript would read
 * it in this machine's zone (and a bare date as UTC), so the same command
 * would restore a different commit on a machine set to another zone.
 * @throws UsageError naming the value and the form to use.
 */
export function parseRestoreTime(value: string, flag = '--time'): number {
  const text = value.trim();
  const time = Date.parse(text);
  if (TIMESTAMP_WITH_ZONE.test(text) && !Number.isNaN(time)) return time;
  if (TIMESTAMP_WITHOUT_ZONE.test(text))
    throw new UsageError(
      `${flag} needs a timezone: add Z for UTC or an offset such as +02:00 (e.g. 2026-11-29T08:00:00Z), got "${value}"`,
    );
  throw new UsageError(
    `${flag} must be an RFC 3339 timestamp with a timezone such as 2026-11-29T08:00:00Z or 2026-11-29T09:00:00+01:00, got "${value}"`,
  );
}

/** What the bucket holds beyond the restore point used, or why that is unknown. */
type NewerDataCheck = { readonly found: UnnamedNewerData } | { readonly problem: string };

/**
 * Lists the bucket for data newer than the restore point at `manifestKey`.
 * Never throws: the restore already succeeded, and a failed check is
 * reported as such (a warning and `newerUnrestorableCheckError`) instead of
 * turning a good restore into a failed command.
 */
async function checkNewerData(
  store: ObjectStore,
  prefix: string,
  manifestKey: string,
  identities: readonly AgeIdentity[],
  signal: AbortSignal,
): Promise<NewerDataCheck> {
  try {
    const found = await findUnnamedNewerDataAfter(store, prefix, manifestKey, {
      signal: AbortSignal.any([signal, AbortSignal.timeout(120_000)]),
      // Called for a restore of the latest state only, which rolled forward.
      afterRollForward: true,
      identities,
    });
    if (found === null) {
      return {
        problem: `${manifestKey} no longer exists (retention removed it after a newer restore point was written)`,
      };
    }
    return { found };
  } catch (error) {
    return { problem: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The newer-data check of a restore of the latest state, started when the
 * restore point is chosen. A restore that had to choose again (a retired
 * restore point) is checked again for the one it restored.
 */
class EarlyNewerDataCheck {
  readonly #abort = new AbortController();
  readonly #store: ObjectStore;
  readonly #prefix: string;
  readonly #identities: readonly AgeIdentity[];
  #started: { readonly manifestKey: string; readonly check: Promise<NewerDataCheck> } | null = null;

  constructor(store: ObjectStore, prefix: string, identities: readonly AgeIdentity[]) {
    this.#store = store;
    this.#prefix = prefix;
    this.#identities = identities;
  }

  readonly start = ({ manifestKey }: { readonly manifestKey: string }): void => {
    this.#started = { manifestKey, check: this.#check(manifestKey) };
  };

  resultFor(manifestKey: string): Promise<NewerDataCheck> {
    const started = this.#started;
    return started?.manifestKey === manifestKey ? started.check : this.#check(manifestKey);
  }

  /** The restore failed: nothing will be reported, so nothing more is asked of the bucket. */
  abandon(): void {
    this.#abort.abort();
  }

  #check(manifestKey: string): Promise<NewerDataCheck> {
    return checkNewerData(
      this.#store,
      this.#prefix,
      manifestKey,
      this.#identities,
      this.#abort.signal,
    );
  }
}

/** Why a restore of the latest state rolled forward no further, when it says anything. */
function rollForwardNote(rolled: RolledForward | undefined): string | undefined {
  if (rolled?.stoppedAt !== undefined)
    return `warning: the roll-forward past the restore point stopped at ${rolled.stoppedAt.key}: ${rolled.stoppedAt.reason}; it and what follows it were not restored`;
  if (rolled?.laterGeneration !== undefined)
    return `warning: the backup holds generation ${rolled.laterGeneration}, later than the restore point's, with no restore point to verify it from: nothing was rolled forward`;
  return undefined;
}

/** "3 newer segment(s)", "1 newer snapshot(s)", or both joined by "and". */
export function newerDataCounts(found: UnnamedNewerData): string {
  const parts: string[] = [];
  if (found.segments > 0 || found.snapshots === 0) parts.push(`${found.segments} newer segment(s)`);
  if (found.snapshots > 0) parts.push(`${found.snapshots} newer snapshot(s)`);
  return `${parts.join(' and ')} (${found.bytes} bytes)`;
}

/** The one-line warning `backupd restore` prints when it left newer data behind. */
export function newerDataWarning(found: UnnamedNewerData): string {
  const where =
    found.newerRestorePoints === 0
      ? 'they are in no restore point and were not restored'
      : `they were not restored; ${found.newerRestorePoints} newer restore point(s) appeared since (backupd ls lists them)`;
  return `warning: the backup holds ${newerDataCounts(found)} shipped after the restore point used (commit ${found.commitSeq}); ${where}`;
}

/** The `newerUnrestorable` field of `--json` output: null when nothing is newer. */
export function newerDataJson(found: UnnamedNewerData): Record<string, unknown> | null {
  if (!holdsUnnamedNewerData(found)) return null;
  return {
    segments: found.segments,
    snapshots: found.snapshots,
    bytes: found.bytes,
    segmentBytes: found.segmentBytes,
    snapshotBytes: found.snapshotBytes,
    firstKey: found.firstKey,
    lastKey: found.lastKey,
    newestGeneration: found.newestGeneration,
    restorePointCommitSeq: found.commitSeq,
    newerRestorePoints: found.newerRestorePoints,
  };
}
