// A worker loop that survives a late renewal: while renewals fail, the
// right to write runs out (mayWrite() false) and the loop pauses; when a
// renewal lands (nobody took over) it resumes. Only a lost lease ends it.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdLease, newInstanceId, WriteDeadlineError } from '@x/lease';
import { AlreadyExistsError, FsStore, StoreError } from '@x/store';
import { ForwardingStore } from '@x/store/adapter';

/** A store whose lease writes fail while `outage` is set: a network blip, simulated. */
class FlakyLeaseStore extends ForwardingStore {
  outage = false;
  put(key, body, options) {
    if (this.outage && key.endsWith('/LEASE'))
      return Promise.reject(new StoreError('simulated outage'));
    return super.put(key, body, options);
  }
}

const store = new FlakyLeaseStore(
  new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') }),
);
let pauses = 0;
const keeper = await holdLease(store, {
  prefix: 'jobs/loop',
  instanceId: newInstanceId(),
  ttlSeconds: 3, // renewals every second, writes stop 2 s after the last one
  renewRetry: 'steady',
  onEvent(event) {
    // End the outage once it has cost us the right to write.
    if (event.type === 'renewal-failed' && event.writesStopped) store.outage = false;
  },
});

/** One item, written exactly once however often the fence falls meanwhile. */
async function writeItem(key, bytes) {
  for (;;) {
    if (!keeper.mayWrite()) pauses += 1;
    await keeper.whenWritable(); // waits out a late renewal; throws once the lease is lost
    try {
      await store.put(key, bytes, {
        mode: 'create',
        signal: AbortSignal.any([keeper.signal, AbortSignal.timeout(10_000)]),
      });
      return;
    } catch (error) {
      if (AlreadyExistsError.isInstance(error)) return; // an earlier attempt landed
      if (!WriteDeadlineError.isInstance(error)) throw error; // lost, or a store failure
    }
  }
}

try {
  store.outage = true;
  for (let item = 0; item < 20; item++) {
    await writeItem(`jobs/loop/${keeper.generation}/item-${item}`, new Uint8Array([item]));
    await sleep(200);
  }
  console.log(`wrote 20 items; paused ${pauses} time(s) while the lease was not renewed`);
} finally {
  await keeper.release();
}
