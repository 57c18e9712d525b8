/** `backupd verify <url> [--deep]`: every restore point and the objects it names; the exit code says the result. */
import { verify } from '@x/restore';
import { booleanOption, type CommandContextFor, defineCommand } from '../cli/command.ts';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './command-store.ts';

const options = { deep: booleanOption() } as const;

export const verifyCommand = defineCommand({
  name: 'verify',
  synopsis: 'verify <url> [--deep]',
  summary: 'check every restore point and the objects it names',
  usage: 'Usage: backupd verify <url> [--deep] [--json]',
  description: `Checks every restore point: the manifest parses, its lineage is consistent,
and every object it names exists with the right size (and CRC-32 with --deep).
Exit code 0 when everything verified, 1 otherwise.`,
  options,
  examples: ['backupd verify s3://my-bucket/app', 'backupd verify s3://my-bucket/app --deep'],
  run: verifyRestorePoints,
});

async function verifyRestorePoints(context: CommandContextFor<typeof options>): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix } = await openUrlArgument(context, 0);
  const deep = context.values.deep ?? false;
  const report = await verify(store, prefix, { deep });
  if (context.values.json) {
    printJson(context, report);
    return report.ok ? EXIT_OK : EXIT_FAILED;
  }
  const lines: string[] = [];
  lines.push(
    `LATEST: ${report.latest.manifestKey ?? '(none)'} ${report.latest.ok ? 'ok' : 'PROBLEM'}`,
  );
  for (const problem of report.latest.problems) lines.push(`  - ${problem.message}`);
  for (const manifest of report.manifests) {
    lines.push(
      `${manifest.key}: ${manifest.status}${manifest.commitSeq !== undefined ? ` (commit ${manifest.commitSeq})` : ''}`,
    );
    for (const problem of manifest.problems) lines.push(`  - ${problem.message}`);
  }
  for (const problem of report.problems) lines.push(`prefix: ${problem.message}`);
  const problems = report.manifests.filter((manifest) => manifest.status === 'problems').length;
  lines.push(
    report.ok
      ? `verified ${report.manifests.length} restore point(s)${deep ? ' with CRC-32 checks' : ' (sizes; add --deep for CRC-32)'}`
      : `FAILED: ${problems} of ${report.manifests.length} restore point(s) have problems${report.latest.ok ? '' : '; LATEST has problems'}`,
  );
  print(context, lines.join('\n'));
  return report.ok ? EXIT_OK : EXIT_FAILED;
}
