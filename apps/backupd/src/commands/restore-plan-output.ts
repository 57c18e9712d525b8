/** `backupd restore --dry-run`: the plan of the restore the options choose, printed; nothing is written. */
import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import { planRestore, type RestorePlan } from '@x/restore';
import { framedStoreMaterializer } from '@x/source-framed';
import { sqliteMaterializer } from '@x/source-sqlite';
import { type CommandContext, UsageError } from '../cli/command.ts';
import { EXIT_OK } from '../exit-codes.ts';
import { formatBytes } from '../format-bytes.ts';
import { chooseByTime } from '../restore-database.ts';
import { openUrlArgument, print, printJson, table } from './command-store.ts';

/** What the command line chose: at most one of commit, time and manifest (checked before). */
export interface PlannedChoice {
  readonly commitSeq?: number | undefined;
  readonly time?: number | undefined;
  readonly manifestKey?: string | undefined;
  readonly type?: 'sqlite' | 'framed' | undefined;
}

/** Prints the plan (text, or JSON with `--json`) and returns exit 0; a bucket it cannot plan from throws as a restore would. */
export async function printRestorePlan(
  context: CommandContext & { readonly values: { readonly json?: boolean | undefined } },
  target: string,
  choice: PlannedChoice,
): Promise<number> {
  const sqlite = (choice.type ?? 'sqlite') === 'sqlite';
  if (!sqlite && choice.time !== undefined)
    throw new UsageError(
      '--time needs commit times, which only SQLite backups record; use --commit',
    );
  const { store, prefix } = await openUrlArgument(context, 0);
  const byTime =
    choice.time === undefined
      ? undefined
      : await chooseByTime(store, prefix, choice.time, undefined);
  const chosen =
    byTime === undefined
      ? {
          ...(choice.manifestKey === undefined ? {} : { manifestKey: choice.manifestKey }),
          ...(choice.commitSeq === undefined ? {} : { commitSeq: choice.commitSeq }),
        }
      : {
          manifestKey: byTime.manifestKey,
          commitSeq: byTime.commitSeq,
          ...(byTime.rollForward ? { rollForward: true } : {}),
        };
  const plan = await planRestore(store, prefix, {
    ...chosen,
    materializer: sqlite
      ? sqliteMaterializer({ databaseName: basename(target) })
      : framedStoreMaterializer,
  });
  const commitTime =
    byTime === undefined ? plan.commitTime : new Date(byTime.commitTime).toISOString();
  const targetExists = existsSync(target);
  if (context.values.json) {
    printJson(context, { dryRun: true, target, targetExists, ...plan, commitTime });
    return EXIT_OK;
  }
  print(context, planText(plan, commitTime, target, targetExists));
  return EXIT_OK;
}

function planText(
  plan: RestorePlan,
  commitTime: string | null,
  target: string,
  targetExists: boolean,
): string {
  const lines = [
    `dry run: a restore to ${target} would land on commit ${plan.commitSeq} (lineage ${plan.lineage}, generation ${plan.walGeneration})`,
    `restore point: ${plan.manifestKey} (restores commits ${plan.restorableFrom} to ${plan.commitSeq})`,
  ];
  const rolled = plan.rolledForward;
  if (rolled !== undefined && rolled.commits > 0)
    lines.push(
      `rolled forward: ${rolled.commits} commit(s) beyond the restore point at commit ${rolled.fromCommitSeq}, over ${rolled.segments} chained segment(s)`,
    );
  if (plan.fellBackFrom !== undefined)
    lines.push(
      `warning: ${plan.fellBackFrom.reason}; the newest restore point that passes restore's checks is used instead`,
    );
  lines.push(
    `commit time: ${commitTime ?? 'not in the manifest (its commit record says it, read during the restore)'}`,
    `download: ${plan.objects.length} object(s), ${formatBytes(plan.bytes)} (${plan.bytes} bytes)`,
    table(
      ['FILE', 'SIZE', 'OBJECT'],
      plan.objects.map((object) => [object.file ?? '(log)', formatBytes(object.size), object.key]),
    ),
    targetExists
      ? `target: ${target} exists: the restore would refuse it without --force`
      : `target: ${target} does not exist: the restore would create it`,
    'nothing was written (--dry-run)',
  );
  return lines.join('\n');
}
