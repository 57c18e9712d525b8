/** `backupd restore --dry-run`: the plan of the restore the options choose, printed; nothing is written. */

import { existsSync } from 'node:fs';
import { basename } from 'node:path';
import type { AgeIdentity } from '@x/age-envelope';
import { planRestore, type RestorePlan, type RestoreTarget } from '@x/restore';
import { framedStoreMaterializer } from '@x/source-framed';
import { sqliteMaterializer } from '@x/source-sqlite';
import type { ObjectStore } from '@x/store';
import { type CommandContext, UsageError } from '../cli/command.ts';
import { EXIT_OK } from '../exit-codes.ts';
import { formatBytes } from '../format-bytes.ts';
import { chooseByTime, type DatabaseRestoreTarget } from '../restore-database.ts';
import { openUrlArgument, print, printJson, table } from './command-store.ts';

/** What the command line chose: the state (from --commit, --time or --manifest) and what to restore. */
export interface PlannedChoice {
  readonly target: DatabaseRestoreTarget;
  readonly type?: 'sqlite' | 'framed' | undefined;
  readonly identities?: readonly AgeIdentity[];
}

/** Prints the plan (text, or JSON with `--json`) and returns exit 0; a bucket it cannot plan from throws as a restore would. */
export async function printRestorePlan(
  context: CommandContext & { readonly values: { readonly json?: boolean | undefined } },
  target: string,
  choice: PlannedChoice,
): Promise<number> {
  const sqlite = (choice.type ?? 'sqlite') === 'sqlite';
  const chosen = choice.target;
  if (!sqlite && chosen.kind === 'time')
    throw new UsageError(
      '--time needs commit times, which only SQLite backups record; use --commit',
    );
  const { store, prefix } = await openUrlArgument(context, 0);
  const identities = choice.identities ?? [];
  const resolved = await resolvedTarget(store, prefix, chosen, identities);
  const plan = await planRestore(store, prefix, {
    target: resolved.target,
    identities,
    materializer: sqlite
      ? sqliteMaterializer({ databaseName: basename(target) })
      : framedStoreMaterializer,
  });
  const commitTime =
    resolved.commitTime === undefined
      ? plan.commitTime
      : new Date(resolved.commitTime).toISOString();
  const targetExists = existsSync(target);
  if (context.values.json) {
    printJson(context, { dryRun: true, target, targetExists, ...plan, commitTime });
    return EXIT_OK;
  }
  print(context, planText(plan, commitTime, target, targetExists));
  return EXIT_OK;
}

/** The library's target for `chosen`: a time is searched for first, and its commit's time kept. */
async function resolvedTarget(
  store: ObjectStore,
  prefix: string,
  chosen: DatabaseRestoreTarget,
  identities: readonly AgeIdentity[],
): Promise<{ readonly target: RestoreTarget; readonly commitTime?: number }> {
  if (chosen.kind !== 'time') return { target: chosen };
  return chooseByTime(store, prefix, chosen.time, undefined, identities);
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
