/** `backupd ls <url>`: the restore points in a prefix. */
import { listRestorePoints, readLatest } from '@x/backup-worker';
import { EXIT_OK } from '../exit-codes.ts';
import type { CommandContext } from '../main.ts';
import {
  expectPositionals,
  formatBytes,
  openUrlArgument,
  print,
  printJson,
  table,
} from './shared.ts';

export async function lsCommand(context: CommandContext): Promise<number> {
  expectPositionals(context, 1);
  const { store, prefix } = await openUrlArgument(context, 0);
  const signal = AbortSignal.timeout(120_000);
  const latest = await readLatest(store, prefix, signal);
  const points = await listRestorePoints(store, prefix, { signal });
  const latestProblem =
    latest.state === 'invalid'
      ? latest.problem
      : latest.state === 'ok' && !points.some((point) => point.latest)
        ? `LATEST names ${latest.manifestKey}, which does not exist`
        : undefined;
  if (context.values.json) {
    printJson(context, latestProblem ? { latestProblem, restorePoints: points } : points);
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
  return EXIT_OK;
}
