/**
 * `backupd ls <url>`: the restore points in a prefix. A local directory that
 * does not exist is an error (exit 1), not an empty listing: it is most often
 * a mistyped path, and "no restore points" would read as a lost backup.
 */
import { existsSync } from 'node:fs';
import {
  findUnnamedNewerDataAfter,
  holdsUnnamedNewerData,
  listRestorePoints,
  readLatest,
  type UnnamedNewerData,
} from '@x/restore';
import { type CommandContextFor, defineCommand, type NoOptions } from '../cli/command.ts';
import { EXIT_OK } from '../exit-codes.ts';
import { parseStoreUrl } from '../store-url.ts';
import { newerDataCounts, newerDataJson } from './restore.ts';
import {
  expectPositionals,
  formatBytes,
  openUrlArgument,
  print,
  printJson,
  table,
} from './shared.ts';

/** `ls` of a local directory that does not exist. */
export class BackupDirectoryMissingError extends Error {
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

export const lsCommand = defineCommand({
  name: 'ls',
  synopsis: 'ls <url>',
  summary: 'list restore points',
  usage: 'Usage: backupd ls <url> [--json]',
  description:
    'Lists restore points: commit, time, size, generation, lineage, and which one LATEST names.',
  options: {},
  examples: ['backupd ls s3://my-bucket/app', 'backupd ls file:///srv/app.db-backups --json'],
  run: listRestorePointsCommand,
});

async function listRestorePointsCommand(context: CommandContextFor<NoOptions>): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix, url } = await openUrlArgument(context, 0);
  // openUrlArgument parsed the same text, so this cannot throw here.
  const location = parseStoreUrl(url);
  if (location.scheme === 'file' && !existsSync(location.root))
    throw new BackupDirectoryMissingError(url, location.root);
  const signal = AbortSignal.timeout(120_000);
  const latest = await readLatest(store, prefix, signal);
  const points = await listRestorePoints(store, prefix, { signal });
  const latestProblem =
    latest.state === 'invalid'
      ? latest.problem
      : latest.state === 'ok' && !points.some((point) => point.latest)
        ? `LATEST names ${latest.manifestKey}, which does not exist`
        : undefined;
  // What a restore of the latest would leave out: measured against the
  // restore point LATEST names, when it is readable.
  const latestPoint = points.find((point) => point.latest && point.status === 'ok');
  let newer: UnnamedNewerData | null = null;
  let newerProblem: string | undefined;
  if (latestPoint !== undefined) {
    try {
      newer = await findUnnamedNewerDataAfter(store, prefix, latestPoint.manifestKey, { signal });
    } catch (error) {
      // The listing above is still true; say that this part is unknown
      // instead of failing the whole command.
      newerProblem = error instanceof Error ? error.message : String(error);
    }
  }
  if (context.values.json) {
    // The field rides on the LATEST entry, so the output keeps its shape.
    const listed = points.map((point) =>
      point !== latestPoint
        ? point
        : newerProblem !== undefined
          ? { ...point, newerUnrestorableCheckError: newerProblem }
          : { ...point, newerUnrestorable: newer === null ? null : newerDataJson(newer) },
    );
    printJson(context, latestProblem ? { latestProblem, restorePoints: listed } : listed);
    return EXIT_OK;
  }
  if (latestProblem) print(context, `PROBLEM: ${latestProblem}`);
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
    point.sizeBytes !== undefined ? formatBytes(point.sizeBytes) : '-',
    point.walGeneration !== undefined ? String(point.walGeneration) : '-',
    point.lineage ?? '-',
    point.status === 'ok' ? 'ok' : `PROBLEM: ${point.problems.join('; ')}`,
  ]);
  print(
    context,
    table(['LATEST', 'COMMITS', 'CREATED', 'SIZE', 'GENERATION', 'LINEAGE', 'STATUS'], rows),
  );
  if (newerProblem !== undefined)
    print(context, `PROBLEM: could not check for data newer than LATEST: ${newerProblem}`);
  else if (newer !== null && holdsUnnamedNewerData(newer)) print(context, newerDataLine(newer));
  return EXIT_OK;
}

/** The line after the table when data newer than LATEST's restore point exists. */
function newerDataLine(found: UnnamedNewerData): string {
  const where =
    found.newerRestorePoints === 0
      ? 'they are in no restore point; a restore of the latest leaves them out'
      : `LATEST does not name them; ${found.newerRestorePoints} restore point(s) above commit ${found.commitSeq} exist`;
  return `NEWER DATA: ${newerDataCounts(found)} shipped after LATEST's restore point (commit ${found.commitSeq}); ${where}`;
}
