/**
 * Runs the lease scenarios once per store (one describe each), and checks
 * that acquire refuses on a real server that ignores conditional headers.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { BucketLease } from '../src/bucket-lease.ts';
import { FakeClock } from '../src/clock.ts';
import { PreconditionsIgnoredError } from '../src/errors.ts';
import { newInstanceId, readLease } from '../src/record.ts';
import { defineLeaseScenarios } from './scenarios.ts';
import { buildTargets, inCi } from './targets.ts';

const { targets, ignoringServers, skipped, notRunning, cleanup } = await buildTargets();
afterAll(cleanup);

for (const target of targets) defineLeaseScenarios(target);

for (const server of ignoringServers) {
  describe(`lease on ${server.name} (ignores conditional headers)`, () => {
    it('acquire fails closed with PreconditionsIgnoredError naming both ignored preconditions', async () => {
      const { store, prefix } = await server.open();
      const instanceId = newInstanceId();
      let caught: unknown;
      try {
        await BucketLease.acquireAs(store, {
          prefix,
          instanceId,
          clock: new FakeClock(),
          logger: { info() {}, warn() {} },
        });
      } catch (error) {
        caught = error;
      }
      expect(PreconditionsIgnoredError.isInstance(caught)).toBe(true);
      const error = caught as PreconditionsIgnoredError;
      expect(error.ignored.join('; ')).toMatch(/create-if-absent/);
      expect(error.ignored.join('; ')).toMatch(/replace-if-version/);
      expect(error.message).toContain('conditional: false');
      const left = await readLease(store, prefix);
      expect(left?.record.instanceId).toBe(instanceId);
      expect(left?.record.released).toBe(true);
    });

    it('best-effort mode runs there and reports it', async () => {
      const { store, prefix } = await server.open();
      const lease = await BucketLease.acquireAs(store, {
        prefix,
        instanceId: newInstanceId(),
        clock: new FakeClock(),
        conditional: false,
        logger: { info() {}, warn() {} },
      });
      expect(lease.exclusion).toBe('best-effort');
      await lease.release();
      expect((await readLease(store, prefix))?.record.released).toBe(true);
    });
  });
}

describe('stores the lease scenarios ran on', () => {
  it(`lists them (skipped: ${skipped.map((entry) => entry.name).join(', ') || 'none'})`, () => {
    for (const entry of [...skipped, ...notRunning])
      console.warn(`lease scenarios skipped on ${entry.name}: ${entry.reason}`);
    expect(targets.map((target) => target.name)).toContain('MemoryStore');
    if (inCi) expect(skipped).toEqual([]);
  });
});
