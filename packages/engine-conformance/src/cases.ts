/**
 * The engine conformance cases. Each runs the real worker and the real
 * restore against an in-memory bucket (in clear, or with the engine's
 * `encryption`) and fails with an assertion naming what differed; none
 * imports a test runner.
 */

import { deepStrictEqual, ok, rejects, strictEqual } from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker, type EncryptionOptions } from '@x/backup-worker';
import { SimulatedCrashError, TestHooks } from '@x/backup-worker/testing';
import type { BackupSource } from '@x/engine';
import { FakeClock } from '@x/lease';
import {
  listRestorePoints,
  planRestore,
  RestoreError,
  type RestoreTarget,
  restore,
} from '@x/restore';
import { MemoryStore } from '@x/store';
import type { EngineFixture, EngineUnderTest } from './engine-under-test.ts';

const PREFIX = 'engine';

export type EngineCaseName =
  | 'capture and exact restore'
  | 'a crash between any two writes'
  | 'restart continuation'
  | 'a corrupt object refused';

export interface EngineCase {
  readonly name: EngineCaseName;
  run(engine: EngineUnderTest): Promise<void>;
}

function newWorker(
  engine: EngineUnderTest,
  store: MemoryStore,
  source: BackupSource,
  clock: FakeClock,
  hooks?: TestHooks,
): BackupWorker {
  return new BackupWorker({
    store,
    prefix: PREFIX,
    source,
    clock,
    manifestIntervalMs: 0,
    compactionLevels: [],
    snapshotIntervalMs: 0,
    snapshotLogFactor: 0,
    ...(engine.encryption === undefined ? {} : { encryption: engine.encryption }),
    ...(hooks === undefined ? {} : { hooks }),
  });
}

/** The identities restore and listing take for `engine`'s encryption. */
function identitiesOf(engine: EngineUnderTest): {
  identities?: NonNullable<EncryptionOptions['identities']>;
} {
  const identities = engine.encryption?.identities;
  return identities === undefined ? {} : { identities };
}

/** `BKO1`, then (at offset 8) encryption 1, `age-x25519`: a sealed object envelope. */
function isSealed(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.subarray(0, 4)).toString('latin1') === 'BKO1' && bytes[8] === 1;
}

/** With encryption on: every object but manifests, `LATEST` and the lease is sealed. */
async function checkSealed(engine: EngineUnderTest, store: MemoryStore): Promise<void> {
  if (engine.encryption === undefined) return;
  const clear = /^engine\/(manifest\/.*|LATEST|LEASE)$/;
  const listed = await store.list(`${PREFIX}/`);
  ok(listed.objects.length > 0, 'the bucket holds objects');
  for (const { key } of listed.objects) {
    if (clear.test(key)) continue;
    ok(isSealed((await store.get(key))!.body), `${key} is sealed (encryption age-x25519)`);
  }
}

/** Restores `target` into a fresh directory and returns the engine's reading of it. */
async function restoredState(
  engine: EngineUnderTest,
  store: MemoryStore,
  target: RestoreTarget = { kind: 'latest' },
): Promise<{ state: string; commitSeq: number }> {
  const directory = await mkdtemp(join(tmpdir(), 'engine-conformance-'));
  try {
    const result = await restore(store, PREFIX, directory, {
      materializer: engine.materializer,
      target,
      ...identitiesOf(engine),
    });
    return { state: await engine.restoredState(directory), commitSeq: result.commitSeq };
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

async function withFixture(
  engine: EngineUnderTest,
  run: (fixture: EngineFixture) => Promise<void>,
): Promise<void> {
  const fixture = await engine.createFixture();
  try {
    await run(fixture);
  } finally {
    await fixture.dispose();
  }
}

/** Steps and commits: every step ships what the commits before it made durable. */
async function shipSteps(
  fixture: EngineFixture,
  worker: BackupWorker,
  steps: number,
  perStep = 2,
): Promise<void> {
  for (let step = 0; step < steps; step += 1) {
    await fixture.commit(perStep);
    await worker.runOnce();
  }
}

const captureAndRestore: EngineCase = {
  name: 'capture and exact restore',
  async run(engine) {
    await withFixture(engine, async (fixture) => {
      const store = new MemoryStore();
      const source = await fixture.openSource();
      const worker = newWorker(engine, store, source, new FakeClock());
      await worker.runOnce();
      const base = (await source.durablePosition()).commitCount;
      ok(base !== null, 'the engine counts its commits');
      // `commit(1)` is one commit: the k-th after the base is commit base + k.
      const byCommit = new Map<number, string>();
      for (let step = 0; step < 4; step += 1) {
        for (let commit = 0; commit < 3; commit += 1) {
          await fixture.commit(1);
          byCommit.set(base + byCommit.size + 1, await fixture.state());
        }
        await worker.runOnce();
      }
      await checkSealed(engine, store);
      const latest = await restoredState(engine, store);
      strictEqual(latest.state, await fixture.state(), 'the latest restore equals the engine');
      strictEqual(latest.commitSeq, base + 12, 'twelve commits after the base were captured');
      for (const [commitSeq, state] of byCommit) {
        const exact = await restoredState(engine, store, { kind: 'commit', commitSeq });
        strictEqual(exact.commitSeq, commitSeq);
        strictEqual(exact.state, state, `a restore of commit ${commitSeq} equals it`);
      }
      await fixture.close(source);
    });
  },
};

const crashBetweenWrites: EngineCase = {
  name: 'a crash between any two writes',
  async run(engine) {
    let writes = 0;
    for (; writes < 200; writes += 1) {
      let completed = false;
      await withFixture(engine, async (fixture) => {
        const store = new MemoryStore();
        const clock = new FakeClock();
        const hooks = new TestHooks();
        hooks.failAfterWrites(writes);
        const first = await fixture.openSource();
        try {
          await shipSteps(fixture, newWorker(engine, store, first, clock, hooks), 4);
          completed = true;
        } catch (error) {
          if (!SimulatedCrashError.isInstance(error)) throw error;
        }
        await fixture.kill(first);
        const second = await fixture.openSource();
        await shipSteps(fixture, newWorker(engine, store, second, clock), 1);
        const latest = await restoredState(engine, store);
        strictEqual(
          latest.state,
          await fixture.state(),
          `after a crash before write ${writes}, a new worker's restore point equals the engine`,
        );
        await fixture.close(second);
      });
      if (completed) break;
    }
    // The first life crashed at several distinct writes before one completed.
    ok(writes >= 4, `the first life made ${writes} writes: too few to test crashes between them`);
    ok(writes < 200, 'the first life never completed');
  },
};

const restartContinuation: EngineCase = {
  name: 'restart continuation',
  async run(engine) {
    await withFixture(engine, async (fixture) => {
      const store = new MemoryStore();
      const clock = new FakeClock();
      const first = await fixture.openSource();
      await shipSteps(fixture, newWorker(engine, store, first, clock), 3);
      const before = await restoredState(engine, store);
      await fixture.close(first);
      const second = await fixture.openSource();
      await shipSteps(fixture, newWorker(engine, store, second, clock), 3);
      const after = await restoredState(engine, store);
      strictEqual(after.state, await fixture.state(), 'the second life ships what it found');
      ok(after.commitSeq > before.commitSeq, 'the commit count continues');
      await checkSealed(engine, store);
      const points = await listRestorePoints(store, PREFIX, identitiesOf(engine));
      const lineages = new Set(points.map((point) => point.lineage));
      deepStrictEqual(lineages.size, 1, 'both lives write one lineage');
      const earlier = await restoredState(engine, store, {
        kind: 'commit',
        commitSeq: before.commitSeq,
      });
      strictEqual(earlier.state, before.state, "the first life's state still restores");
      await fixture.close(second);
    });
  },
};

const corruptObjectRefused: EngineCase = {
  name: 'a corrupt object refused',
  async run(engine) {
    await withFixture(engine, async (fixture) => {
      const store = new MemoryStore();
      const source = await fixture.openSource();
      await shipSteps(fixture, newWorker(engine, store, source, new FakeClock()), 3);
      await fixture.close(source);
      // Every object a restore of the latest state downloads.
      const plan = await planRestore(store, PREFIX, {
        materializer: engine.materializer,
        ...identitiesOf(engine),
      });
      const named = plan.objects.map((object) => object.key);
      ok(named.length > 1, 'a restore downloads a snapshot and log objects');
      for (const key of named) {
        const original = (await store.get(key))!.body;
        const flipped = Uint8Array.from(original);
        const at = Math.floor(flipped.length / 2);
        flipped[at] = flipped[at]! ^ 0x01;
        await store.put(key, flipped);
        await rejects(
          restoredState(engine, store),
          (error: unknown) => RestoreError.isInstance(error),
          `a restore refuses ${key} with one bit flipped`,
        );
        await store.put(key, original);
      }
      deepStrictEqual((await restoredState(engine, store)).state, await fixture.state());
    });
  },
};

/** Every case, in the order the suite runs them. */
export const ENGINE_CASES: readonly EngineCase[] = [
  captureAndRestore,
  crashBetweenWrites,
  restartContinuation,
  corruptObjectRefused,
];

/** Runs every case; resolves with the names of those that failed, and why. */
export async function runEngineConformance(
  engine: EngineUnderTest,
): Promise<{ readonly name: EngineCaseName; readonly error: unknown }[]> {
  const failures: { name: EngineCaseName; error: unknown }[] = [];
  for (const engineCase of ENGINE_CASES) {
    try {
      await engineCase.run(engine);
    } catch (error) {
      failures.push({ name: engineCase.name, error });
    }
  }
  return failures;
}
