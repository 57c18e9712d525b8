/**
 * `openSource`: the worker opens its source only while it holds the lease,
 * closes it once it knows the lease is gone, and opens afresh at its next
 * tenure. A standby never opens it.
 */

import { BackupWorker } from '@x/backup-worker';
import type { BackupSource } from '@x/engine';
import type { FakeClock } from '@x/lease';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import type { FramedTestEngine } from './helpers/framed-engine.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

const TTL_S = 6;

/** Opens framed sources on `directory` and records every open and close. */
class RecordingOpener {
  readonly events: string[] = [];
  #opened = 0;

  readonly directory: string;
  readonly engine: FramedTestEngine;

  constructor(directory: string, engine: FramedTestEngine) {
    this.directory = directory;
    this.engine = engine;
  }

  readonly open = async (): Promise<BackupSource> => {
    this.#opened += 1;
    const number = this.#opened;
    const events = this.events;
    events.push(`open ${number}`);
    return new (class extends FramedDirSource {
      async close(): Promise<void> {
        events.push(`close ${number}`);
      }
    })({ directory: this.directory, engine: this.engine });
  };
}

describe('a worker that opens its own source (openSource)', () => {
  let workers: StartedWorkers;
  let directory: string;
  let engine: FramedTestEngine;
  let clock: FakeClock;

  beforeEach(async () => {
    workers = await StartedWorkers.create('source-lifecycle-');
    ({ directory, engine, clock } = workers);
  });
  afterEach(() => workers.dispose({ stepMs: 500, maxMs: 60_000 }));

  function start(store: CountingStore, opener: RecordingOpener) {
    return workers.start(store, {
      prefix: 'p',
      openSource: opener.open,
      leaseTtlSeconds: TTL_S,
      walIntervalMs: 1_000,
      operationTimeoutMs: 2_000,
      shutdownGraceMs: 3_000,
    }).handle;
  }

  it('opens with the lease, never on a standby, closes once the lease is known lost, reopens at the next tenure', async () => {
    const bucket = new MemoryStore();
    const storeA = new CountingStore(bucket);
    const storeB = new CountingStore(bucket);
    const openerA = new RecordingOpener(directory, engine);
    const openerB = new RecordingOpener(directory, engine);
    const a = start(storeA, openerA);
    await waitFor(clock, () => a.health().latestRestorePoint !== null, { what: 'A to back up' });
    expect(openerA.events).toEqual(['open 1']);

    // B waits for the lease for several TTLs: it never opens the source.
    const b = start(storeB, openerB);
    await waitFor(clock, () => false, { maxMs: 3 * TTL_S * 1000 }).catch(() => {});
    expect(b.health().leaseHeld).toBe(false);
    expect(openerB.events).toEqual([]);

    // A's bucket stops answering: B takes over and opens its own source. A
    // cannot learn that it lost the lease while its bucket is silent (its
    // writes are fenced): its source stays open until it does.
    storeA.hang = true;
    await waitFor(clock, () => b.health().leaseHeld && openerB.events.length > 0, {
      what: 'B to take over and open',
    });
    expect(openerB.events).toEqual(['open 1']);
    expect(openerA.events).toEqual(['open 1']);

    // B stops and releases: its source closes after the release.
    await workers.stop(b, { stepMs: 500, what: 'B to stop' });
    expect(openerB.events).toEqual(['open 1', 'close 1']);

    // A's bucket answers again: A learns its lease is gone, closes its
    // source, takes the lease afresh and opens a new source for the tenure.
    storeA.hang = false;
    await waitFor(clock, () => a.health().leaseHeld && openerA.events.length === 3, {
      stepMs: 500,
      what: 'A to take the lease again and reopen',
    });
    expect(openerA.events).toEqual(['open 1', 'close 1', 'open 2']);
  });

  it('refuses options with both or neither of source and openSource', () => {
    const store = new MemoryStore();
    const source = new FramedDirSource({ directory, engine });
    expect(() => new BackupWorker({ store, prefix: 'p' })).toThrow(
      'exactly one of `source` and `openSource`',
    );
    expect(
      () => new BackupWorker({ store, prefix: 'p', source, openSource: async () => source }),
    ).toThrow('exactly one of `source` and `openSource`');
  });
});
