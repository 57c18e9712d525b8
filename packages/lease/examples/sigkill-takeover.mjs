// A holder killed with SIGKILL cannot release: another process takes the
// lease over once a full TTL has passed since the dead holder's last renewal.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ForeignActiveError, holdLease, newInstanceId, readLease, waitForLease } from '@x/lease';
import { FsStore } from '@x/store';

const store = new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') });
const prefix = 'jobs/killed';
const ttlSeconds = 3; // the shortest TTL, to keep the example short

if (process.argv[2] === 'holder') {
  await holdLease(store, { prefix, instanceId: newInstanceId(), ttlSeconds });
  process.send('holding');
  setInterval(() => {}, 1_000); // keep running (and renewing) until killed
} else {
  const holder = fork(import.meta.filename, ['holder']);
  await once(holder, 'message');
  holder.kill('SIGKILL');
  await once(holder, 'exit');
  const dead = (await readLease(store, prefix)).record;

  try {
    await holdLease(store, { prefix, instanceId: newInstanceId(), ttlSeconds });
    throw new Error('unexpected: took the lease of a holder killed less than a TTL ago');
  } catch (error) {
    if (!ForeignActiveError.isInstance(error)) throw error;
    console.log('right after the kill: still held by the dead process');
  }

  const keeper = await waitForLease(store, {
    prefix,
    instanceId: newInstanceId(),
    ttlSeconds,
    timeoutMs: 15_000,
  });
  try {
    const afterMs = keeper.lease.record.acquiredAt - dead.renewedAt;
    console.log(
      `taken over ${afterMs} ms after the dead holder's last renewal (TTL ${ttlSeconds * 1000} ms), generation ${dead.generation} -> ${keeper.generation}`,
    );
    if (afterMs < ttlSeconds * 1000) {
      console.error('taken over before a full TTL');
      process.exitCode = 1;
    }
  } finally {
    await keeper.release();
  }
}
