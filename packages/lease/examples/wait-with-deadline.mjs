import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdLease, LeaseWaitTimeoutError, newInstanceId, waitForLease } from '@x/lease';
import { FsStore } from '@x/store';

const store = new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') });
const prefix = 'jobs/report';

// Someone else holds the lease (here: this process, under another instance id).
const other = await holdLease(store, { prefix, instanceId: newInstanceId() });

// Wait at most 2 s: the holder neither releases nor expires (30 s TTL) in time.
try {
  await waitForLease(store, { prefix, instanceId: newInstanceId(), timeoutMs: 2_000 });
  throw new Error('unexpected: the lease was free');
} catch (error) {
  if (!LeaseWaitTimeoutError.isInstance(error)) throw error;
  console.log(`gave up: ${error.message}`);
}

// Now the holder releases after 1 s; a waiter with a 10 s deadline gets it then.
setTimeout(() => void other.release(), 1_000);
const keeper = await waitForLease(store, {
  prefix,
  instanceId: newInstanceId(),
  timeoutMs: 10_000,
});
try {
  console.log(`took the lease: generation ${keeper.generation}`);
} finally {
  await keeper.release();
}
