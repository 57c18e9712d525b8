/**
 * A planned stop is not a failure: a step whose requests the stop aborts is
 * logged at info as abandoned, never as a failed step, and the flush that
 * follows ships what it was shipping.
 */
import type { BackupLogger } from '@x/backup-worker';
import { MemoryStore } from '@x/store';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './helpers/drive.ts';
import { StartedWorkers } from './helpers/started-workers.ts';
import { CountingStore } from './helpers/stores.ts';

function levelledLogger(): { logger: BackupLogger; lines: { level: string; event: string }[] } {
  const lines: { level: string; event: string }[] = [];
  const at = (level: string) => (event: string) => void lines.push({ level, event });
  return {
    logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    lines,
  };
}

describe('a step cut short by a planned stop', () => {
  let workers: StartedWorkers;
  afterEach(async () => {
    await workers.dispose({ stepMs: 500, maxMs: 60_000 });
  });

  it('is logged as abandoned at info, not as a failed step, and the stop is complete', async () => {
    workers = await StartedWorkers.create('shutdown-step-abandoned-');
    const { clock, engine } = workers;
    const store = new CountingStore(new MemoryStore());
    const { logger, lines } = levelledLogger();
    const { handle } = workers.start(store, {
      prefix: 'p',
      logger,
      leaseTtlSeconds: 6,
      walIntervalMs: 1_000,
      operationTimeoutMs: 30_000,
      shutdownGraceMs: 5_000,
    });
    await waitFor(
      clock,
      () => handle.health().latestRestorePoint?.commitSeq === engine.durableCommits,
      { what: 'the first restore point' },
    );
    // The next step's upload hangs until the stop aborts it.
    store.hang = true;
    const before = store.writes.length;
    await engine.commit(2);
    await waitFor(
      clock,
      () => store.writes.slice(before).some((write) => !write.endsWith('/LEASE')),
      { what: 'a step in flight' },
    );
    let report: Awaited<ReturnType<typeof handle.shutdown>> | undefined;
    void handle.shutdown().then((r) => {
      report = r;
    });
    store.hang = false;
    await waitFor(clock, () => report !== undefined, { what: 'shutdown' });
    expect(report).toMatchObject({ complete: true, restorableCommitSeq: engine.durableCommits });
    expect(lines).toContainEqual({ level: 'info', event: 'backup.step_abandoned' });
    expect(lines.filter((line) => line.event === 'backup.step_failed')).toEqual([]);
  });
});
