import { MemoryStore } from '@x/store';
import { faultyStore, injectedFaultKind, ManualClock } from '@x/test-faults';

const clock = new ManualClock();
const store = faultyStore(new MemoryStore(), {
  seed: 7,
  clock,
  schedule: { rules: [{ kind: 'error503', methods: ['put'], probability: 0.2 }] },
});

// The same seed fails the same calls on every run.
const failed = [];
for (let n = 0; n < 10; n++) {
  try {
    await store.put(`k${n}`, new Uint8Array([n]), { mode: 'create' });
  } catch (error) {
    failed.push(`k${n}: ${injectedFaultKind(error)}`);
  }
}
console.log(failed.join(', '));
console.log(store.counts().error503 === failed.length);
