/**
 * A stop is complete only when it knows nothing committed was left out.
 * A flush the grace period abandons never is, even when the counts agree
 * (the capture had not reached the WAL's end, so commits on disk are in no
 * count); a stop that never held the lease never is either, unless the
 * source holds nothing.
 */
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

/** A source whose catch-up stops returning once `stuck` is set: a capture that cannot reach the end. */
class StuckCatchUp extends FramedDirSource {
  stuck = false;

  override async catchUp(): Promise<void> {
    if (this.stuck) await new Promise<never>(() => {});
    return super.catchUp();
  }
}

const TIMINGS = {
  prefix: 'p',
  leaseTtlSeconds: 6,
  walIntervalMs: 1_000,
  operationTimeoutMs: 2_000,
  shutdownGraceMs: 2_000,
};

describe('a stop that could not confirm', () => {
  let workers: StartedWorkers;
  afterEach(async () => {
    await workers.dispose({ stepMs: 500, maxMs: 60_000 });
  });

  it('with its flush abandoned at the end of the grace period is incomplete, though every captured commit is restorable', async () => {
    workers = await StartedWorkers.create('shutdown-abandoned-flush-');
    const { clock, engine, directory } = workers;
    const source = new StuckCatchUp({ directory, engine });
    const { handle } = workers.start(new CountingStore(new MemoryStore()), { ...TIMINGS, source });
    await waitFor(
      clock,
      () => handle.health().latestRestorePoint?.commitSeq === engine.durableCommits,
      { what: 'every commit restorable' },
    );
    source.stuck = true;
    let report: Awaited<ReturnType<typeof handle.shutdown>> | undefined;
    void handle.shutdown().then((r) => {
      report = r;
    });
    await waitFor(clock, () => report !== undefined, { what: 'shutdown' });
    expect(report).toMatchObject({
      complete: false,
      shortfall: 'flush-abandoned',
      unrestorableCommits: 0,
      restorableCommitSeq: engine.durableCommits,
      capturedCommitSeq: engine.durableCommits,
      heldLease: true,
    });
  });

  it('that never held the lease (the bucket never answered) is incomplete, and counts what its source holds', async () => {
    workers = await StartedWorkers.create('shutdown-never-held-');
    const { clock, engine } = workers;
    const store = new CountingStore(new MemoryStore());
    store.hang = true;
    const { handle } = workers.start(store, TIMINGS);
    await waitFor(clock, () => handle.health().errorCount > 0, { what: 'a failed attempt' });
    let report: Awaited<ReturnType<typeof handle.shutdown>> | undefined;
    void handle.shutdown().then((r) => {
      report = r;
    });
    await waitFor(clock, () => report !== undefined, { what: 'shutdown' });
    expect(report).toMatchObject({
      complete: false,
      shortfall: 'never-held-lease',
      heldLease: false,
      capturedCommitSeq: engine.durableCommits,
      unrestorableCommits: engine.durableCommits,
      restorableCommitSeq: null,
    });
    expect(report!.lastError).toContain('taking the bucket lease');
  });
});
