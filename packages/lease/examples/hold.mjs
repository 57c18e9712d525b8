import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdLease, newInstanceId } from '@x/lease';
import { FsStore } from '@x/store';

// Any ObjectStore works (S3, Azure, GCS); a directory keeps the example self-contained.
const store = new FsStore({ root: process.env.LEASE_DIR ?? join(tmpdir(), 'lease-example') });

const keeper = await holdLease(store, {
  prefix: 'jobs/nightly',
  instanceId: newInstanceId(), // keep it for every attempt of this process
});
try {
  // Stamp the generation on what you write: it is one higher on every new
  // tenure, so this create-if-absent never meets what an earlier run wrote.
  const key = `jobs/nightly/out-${keeper.generation}`;
  // Pass the fence to every write: it aborts when this process must stop writing.
  await store.put(key, new TextEncoder().encode('done\n'), {
    mode: 'create',
    signal: keeper.signal,
  });
  console.log(`wrote ${key}`);
} finally {
  await keeper.release(); // the next run takes the lease at once
}
