import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { encodeFrame, FrameCounter, readNewSegment, scanSqliteWalFile } from '@x/wal-segment';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wal-segment-example-'));
try {
  // A framed log of three commits, of which the first two are durable:
  const walPath = path.join(dir, 'wal.bin');
  const frames = ['one', 'two', 'three'].map((text) => encodeFrame(new TextEncoder().encode(text)));
  fs.writeFileSync(walPath, Buffer.concat(frames));
  const durableLength = frames[0].length + frames[1].length;

  // Ship what is durable and whole, from where the last segment ended:
  let cursor = 0;
  const segment = await readNewSegment(walPath, cursor, durableLength);
  if (segment) {
    console.log(`segment ${segment.start}-${segment.end}: ${segment.frames} frames`);
    cursor = segment.end;
  }

  // Count frames of a file while streaming it somewhere:
  const counter = new FrameCounter();
  for await (const chunk of fs.createReadStream(walPath)) counter.push(chunk);
  console.log(`${counter.frames} frames in ${counter.completeLength} bytes`);

  // SQLite: where the committed WAL ends, and how many commits it holds.
  const db = new DatabaseSync(path.join(dir, 'app.db'));
  db.exec('PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)');
  const scan = await scanSqliteWalFile(path.join(dir, 'app.db-wal'));
  console.log(`${scan.commits} commits, valid up to byte ${scan.validLength}`);
  db.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
