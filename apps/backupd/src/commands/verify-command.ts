/** `backupd verify <url> [--deep [--all] [--scratch <dir>]]`: every restore point and the objects it names; the exit code says the result. */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { type VerifyProblem, verify } from '@x/restore';
import { sqliteRestoreCheck } from '@x/source-sqlite';
import { AGE_IDENTITY_FILE_OPTIONS } from '../cli/age-identity-option.ts';
import {
  booleanOption,
  type CommandContextFor,
  defineCommand,
  stringOption,
  UsageError,
} from '../cli/command.ts';
import { commandLineIdentities } from '../encryption-settings.ts';
import { EXIT_FAILED, EXIT_OK } from '../exit-codes.ts';
import { expectPositionals, openUrlArgument, print, printJson } from './command-store.ts';

const options = {
  deep: booleanOption({
    description:
      'also read every object (CRC-32) and rebuild SQLite restore points into a temporary directory (integrity_check, page hashes)',
  }),
  all: booleanOption({
    description:
      'with --deep: rebuild every restore point (default: LATEST and the newest of each generation)',
  }),
  scratch: stringOption({
    argument: '<dir>',
    description:
      'with --deep: make the temporary directory of each rebuild in <dir> (default: the OS temporary directory)',
  }),
  ...AGE_IDENTITY_FILE_OPTIONS,
} as const;

export const verifyCommand = defineCommand({
  name: 'verify',
  synopsis: 'verify <url> [--deep [--all] [--scratch <dir>]]',
  summary: 'check every restore point and the objects it names',
  usage:
    'Usage: backupd verify <url> [--deep [--all] [--scratch <dir>]] [--age-identity-file <file>]... [--json]',
  description: `Checks every restore point: the manifest parses, its lineage is consistent,
and every object it names exists with the right size (and CRC-32 with --deep).
With --deep, SQLite restore points are also restored, one at a time, into a
temporary directory that is removed after each: PRAGMA integrity_check must
answer ok and every page must hash as the restore point's objects say. By
default LATEST and the newest restore point of each generation are rebuilt;
--all rebuilds every one (one restore each; disk: about one restore at a time).
With --deep, encrypted objects open with an identity of one of their recipients
(--age-identity-file). Exit code 0 when everything verified, 1 otherwise.`,
  options,
  examples: [
    'backupd verify s3://my-bucket/app',
    'backupd verify s3://my-bucket/app --deep',
    'backupd verify s3://my-bucket/app --deep --all --scratch /var/tmp',
    'backupd verify s3://my-bucket/app --deep --age-identity-file /etc/backupd/age-key.txt',
  ],
  run: verifyRestorePoints,
});

/** `--scratch`: an existing directory, absolute. @throws UsageError */
function scratchDirectory(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const directory = resolve(text);
  let isDirectory = false;
  try {
    isDirectory = statSync(directory).isDirectory();
  } catch {
    // Reported below.
  }
  if (!isDirectory) throw new UsageError(`--scratch ${text}: not an existing directory`);
  return directory;
}

async function verifyRestorePoints(context: CommandContextFor<typeof options>): Promise<number> {
  expectPositionals(context, 1);
  const deep = context.values.deep ?? false;
  const all = context.values.all ?? false;
  if (!deep && (all || context.values.scratch !== undefined))
    throw new UsageError(`${all ? '--all' : '--scratch'} is an option of --deep: add --deep`);
  const scratch = scratchDirectory(context.values.scratch);
  const { store, prefix } = await openUrlArgument(context, 0);
  const identities = commandLineIdentities({
    files: context.values['age-identity-file'],
    env: context.env,
    cwd: context.cwd,
  });
  const report = await verify(store, prefix, {
    deep,
    identities,
    ...(deep
      ? {
          rebuild: {
            check: sqliteRestoreCheck(),
            points: all ? ('all' as const) : ('newest' as const),
            ...(scratch === undefined ? {} : { scratchDirectory: scratch }),
          },
        }
      : {}),
  });
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
    const facts = [
      ...(manifest.commitSeq !== undefined ? [`commit ${manifest.commitSeq}`] : []),
      ...(manifest.rebuilt === true ? ['rebuilt'] : []),
    ];
    lines.push(
      `${manifest.key}: ${manifest.status}${facts.length > 0 ? ` (${facts.join(', ')})` : ''}`,
    );
    for (const problem of manifest.problems) lines.push(`  - ${problemLine(problem)}`);
  }
  for (const problem of report.problems) lines.push(`prefix: ${problem.message}`);
  const problems = report.manifests.filter((manifest) => manifest.status === 'problems').length;
  const rebuilt =
    report.rebuilt > 0
      ? `; rebuilt ${report.rebuilt} (integrity_check and page hashes${all ? ', every restore point' : ''})`
      : '';
  lines.push(
    report.ok
      ? `verified ${report.manifests.length} restore point(s)${deep ? ` with CRC-32 checks${rebuilt}` : ' (sizes; add --deep for CRC-32)'}`
      : `FAILED: ${problems} of ${report.manifests.length} restore point(s) have problems${report.latest.ok ? '' : '; LATEST has problems'}`,
  );
  print(context, lines.join('\n'));
  return report.ok ? EXIT_OK : EXIT_FAILED;
}

/** A problem's line: a rebuild's names what it checked. */
function problemLine(problem: VerifyProblem): string {
  switch (problem.kind) {
    case 'integrity-check':
      return `rebuilt, integrity_check fails: ${problem.message}`;
    case 'page-hash':
      return `rebuilt, page ${problem.page} differs (expected ${problem.expected}, found ${problem.found}): ${problem.message}`;
    case 'rebuild':
      return `rebuild fails: ${problem.message}`;
    case 'superseded-tenure':
      return `superseded lease tenure: ${problem.message}`;
    default:
      return problem.message;
  }
}
