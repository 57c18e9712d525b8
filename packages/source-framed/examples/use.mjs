import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { FsStore } from '@x/store';
import { encodeFrame } from '@x/wal-segment';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'source-framed-example-'));
try {
  // A framed store of three commits (what an engine writes in its directory):
  const db1 = path.join(dir, 'db1');
  fs.mkdirSync(db1);
  const commits = ['one', 'two', 'three'].map((text) => encodeFrame(Buffer.from(text)));
  fs.writeFileSync(path.join(db1, 'wal.bin'), Buffer.concat(commits));

  const store = new FsStore({ root: path.join(dir, 'backups') });
  const worker = new BackupWorker({
    store,
    prefix: 'db1',
    source: new FramedDirSource({ directory: db1 }),
  });
  const handle = worker.start();
  // …
  const report = await handle.shutdown(); // flush, final restore point, release the lease
  console.log(`backed up: commit ${report.restorableCommitSeq}, complete: ${report.complete}`);

  // The newest restore point, as a framed store directory:
  const restored = path.join(dir, 'db1-restored');
  const result = await restoreFramedStore(store, 'db1', restored);
  console.log(`restored: commit ${result.commitSeq} from ${result.manifestKey}`);
  const same = fs.readFileSync(path.join(restored, 'wal.bin')).equals(Buffer.concat(commits));
  console.log(`wal.bin as written: ${same}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
