/**
 * backupd in its own process, for the kill tests: SqliteSource + BackupWorker
 * shipping to an FsStore, one step every 50 ms until killed. Prints one line
 * `{ "step": n, "commitCount": c }` after every step.
 *
 * argv: <database> <bucket directory> <prefix>
 */

import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { FsStore } from '@x/store';
import { SqliteSource } from '../src/sqlite-source.ts';

const [path, bucket, prefix] = process.argv.slice(2);
if (!path || !bucket || !prefix) throw new Error('usage: backupd-child <db> <bucket> <prefix>');
const source = SqliteSource.open({ path, captureIntervalMs: 20, truncateCheckpointPages: 200 });
const worker = new BackupWorker({
  store: new FsStore({ root: bucket }),
  prefix,
  source,
  clock: new FakeClock(),
  manifestIntervalMs: 0,
});
for (let step = 1; ; step += 1) {
  await worker.runOnce();
  const position = await source.durablePosition();
  process.stdout.write(`${JSON.stringify({ step, commitCount: position.commitCount })}\n`);
  await new Promise((resolve) => setTimeout(resolve, 50));
}
