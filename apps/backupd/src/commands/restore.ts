/** `backupd restore <url> <target>`: restore a database (or store directory) from a backup. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
  restore,
  type UnnamedNewerData,
} from '@x/backup-worker';
import type { ObjectStore } from '@x/store';
import { EXIT_OK, EXIT_REFUSED } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';
import { UsageError } from '../main.ts';
import { progressReporter } from '../progress-bar.ts';
import { restoreDatabase } from '../restore-database.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './shared.ts';

export async function restoreCommand(context: CommandContext): Promise<number> {
  expectPositionals(context, 2);
  if (context.positionals[0] === undefined) throw new UsageError('missing <url>');
  const targetArgument = context.positionals[1];
  if (targetArgument === undefined) throw new UsageError('missing <target>');
  const target = resolve(context.cwd, targetArgument);
  const chosen = ['commit', 'time', 'manifest'].filter(
    (name) => context.values[name] !== undefined,
  );
  if (chosen.length > 1)
    throw new UsageError(
      `choose one of --commit, --time, --manifest (got ${chosen.map((c) => `--${c}`).join(' and ')})`,
    );
  if (context.values['if-missing'] && context.values.force)
    throw new UsageError('--if-missing and --force contradict each other');
  let commitSeq: number | undefined;
  if (typeof context.values.commit === 'string') {
    if (
      !/^\d+$/.test(context.values.commit) ||
      !Number.isSafeInteger(Number(context.values.commit))
    ) {
      throw new UsageError(`--commit must be a whole number, got "${context.values.commit}"`);
    }
    commitSeq = Number(context.values.commit);
  }
  let time: number | undefined;
  if (typeof context.values.time === 'string') time = parseRestoreTime(context.values.time);
  const type = (context.values.type as string | undefined) ?? 'sqlite';
  if (type !== 'sqlite' && type !== 'framed')
    throw new UsageError(`--type must be sqlite or framed, got "${type}"`);
  if (existsSync(target) && context.values['if-missing']) {
    print(context, `${target} exists; nothing restored (--if-missing)`);
    return EXIT_OK;
  }
  const { store, prefix } = await openUrlArgument(context, 0);
  const progress = progressReporter(context.stderr);
  const manifestKey =
    typeof context.values.manifest === 'string' ? context.values.manifest : undefined;
  try {
    const result =
      type === 'framed'
        ? await restoreFramed()
        : await restoreDatabase(store, prefix, target, {
            ...(manifestKey ? { manifestKey } : {}),
            ...(commitSeq !== undefined ? { commitSeq } : {}),
            ...(time !== undefined ? { time } : {}),
            force: context.values.force === true,
            onProgress: (state) => progress.update(state),
          });
    progress.finish();
    // Only a restore of the latest promises "everything backed up"; a chosen
    // commit, time or manifest leaves newer data out on purpose.
    const newer =
      chosen.length === 0 ? await checkNewerData(store, prefix, result.manifestKey) : undefined;
    if (newer !== undefined) {
      const warning =
        'problem' in newer
          ? `warning: could not check the backup for data newer than the restore point used (commit ${result.commitSeq}): ${newer.problem}`
          : holdsUnnamedNewerData(newer.found)
            ? newerDataWarning(newer.found)
            : undefined;
      if (warning !== undefined) context.stderr.write(context.redactor.text(`${warning}\n`));
    }
    if (context.values.json) {
      printJson(
        context,
        newer === undefined
          ? result
          : 'problem' in newer
            ? { ...result, newerUnrestorableCheckError: newer.problem }
            : { ...result, newerUnrestorable: newerDataJson(newer.found) },
      );
    } else
      print(context, `restored commit ${result.commitSeq} from ${result.manifestKey} to ${target}`);
    // The restore itself worked: newer data it could not include is a
    // warning, not a failure (README: exit codes).
    return EXIT_OK;
  } catch (error) {
    progress.finish();
    if (
      (error as { code?: string }).code === 'RESTORE_TARGET_NOT_EMPTY' ||
      (error as { code?: string }).code === 'SQLITE_RESTORE_TARGET_EXISTS'
    ) {
      context.stderr.write(
        context.redactor.text(
          `backupd restore: ${(error as Error).message}\nuse --force to overwrite, or --if-missing to keep what is there\n`,
        ),
      );
      return EXIT_REFUSED;
    }
    throw error;
  }

  async function restoreFramed() {
    if (time !== undefined)
      throw new UsageError(
        '--time needs commit times, which only SQLite backups record; use --commit',
      );
    return restore(store, prefix, target, {
      ...(manifestKey ? { manifestKey } : {}),
      ...(commitSeq !== undefined ? { commitSeq } : {}),
      force: context.values.force === true,
      onProgress: (state) => progress.update(state),
    });
  }
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
export function parseRestoreTime(value: string): number {
  const text = value.trim();
  const time = Date.parse(text);
  if (TIMESTAMP_WITH_ZONE.test(text) && !Number.isNaN(time)) return time;
  if (TIMESTAMP_WITHOUT_ZONE.test(text))
    throw new UsageError(
      `--time needs a timezone: add Z for UTC or an offset such as +02:00 (e.g. 2026-11-29T08:00:00Z), got "${value}"`,
    );
  throw new UsageError(
    `--time must be an RFC 3339 timestamp with a timezone such as 2026-11-29T08:00:00Z or 2026-11-29T09:00:00+01:00, got "${value}"`,
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
): Promise<NewerDataCheck> {
  try {
    const found = await findUnnamedNewerDataAfter(store, prefix, manifestKey, {
      signal: AbortSignal.timeout(120_000),
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
