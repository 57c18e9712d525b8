// A holder that gets SIGTERM stops its work, releases the lease and exits;
// a process waiting for the lease takes it at once, not after the TTL.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdLease, newInstanceId, waitForLease } from '@x/lease';
import { FsStore } from '@x/store';

const store = new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') });
const prefix = 'jobs/handover';

if (process.argv[2] === 'holder') {
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  const keeper = await holdLease(store, { prefix, instanceId: newInstanceId(), ttlSeconds: 30 });
  process.send('holding');
  try {
    for (let item = 0; !stop.signal.aborted; item++) {
      await keeper.whenWritable({ signal: stop.signal });
      const signal = AbortSignal.any([keeper.signal, stop.signal]);
      await store.put(`${prefix}/out/${keeper.generation}/${item}`, new Uint8Array([item % 256]), {
        mode: 'create',
        signal,
      });
      await sleep(100, undefined, { signal: stop.signal });
    }
  } catch (error) {
    if (!stop.signal.aborted) throw error; // a stop ends the loop; anything else is a failure
  } finally {
    await keeper.release(); // the released record lets the next holder in at once
  }
} else {
  const holder = fork(import.meta.filename, ['holder']);
  const exited = once(holder, 'exit');
  await once(holder, 'message');
  // The TTL is 30 s and the waiter gives up after 10 s: only a release lets it in.
  const waiting = waitForLease(store, { prefix, instanceId: newInstanceId(), timeoutMs: 10_000 });
  holder.kill('SIGTERM');
  const keeper = await waiting;
  const [code] = await exited;
  try {
    console.log(`holder exited with ${code}; taken over at generation ${keeper.generation}`);
    if (code !== 0) process.exitCode = 1;
  } finally {
    await keeper.release();
  }
}
