/** `backupd restore <url> <target>`: restore a database (or store directory) from a backup. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { restore } from '@x/backup-worker';
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
  if (typeof context.values.time === 'string') {
    time = Date.parse(context.values.time);
    if (Number.isNaN(time))
      throw new UsageError(
        `--time must be a timestamp such as 2026-11-29T08:00:00Z, got "${context.values.time}"`,
      );
  }
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
    if (context.values.json) printJson(context, result);
    else
      print(context, `restored commit ${result.commitSeq} from ${result.manifestKey} to ${target}`);
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
