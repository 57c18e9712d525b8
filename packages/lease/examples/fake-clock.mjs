import { BucketLease, FakeClock } from '@x/lease';
import { MemoryStore } from '@x/store';

const clock = new FakeClock();
const lease = await BucketLease.acquireAs(new MemoryStore(), {
  prefix: 'db',
  instanceId: 'a',
  ttlSeconds: 30,
  clock,
});
clock.advance(20_000);
console.log(lease.mayWrite()); // false: two thirds of the TTL passed without a renewal
await lease.renew(); // nobody took over: succeeds, and a new fence signal opens
console.log(lease.mayWrite()); // true
