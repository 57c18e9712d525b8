import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { recordingLogger } from '../../test/helpers/recording-logger.ts';
import { EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PERMANENT_REFUSAL } from '../exit-codes.ts';
import type { Application } from './application.ts';
import type { ReplicaRefusal } from './refusals.ts';
import {
  type EarlySignals,
  holdEarlySignals,
  type SignalSource,
  superviseUntilStopped,
} from './signals.ts';

class FakeSignals extends EventEmitter implements SignalSource {
  send(signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP'): void {
    this.emit(signal, signal);
  }
}

class FakeApplication extends EventEmitter implements Application {
  exitCode: number | null = null;
  readonly received: NodeJS.Signals[] = [];
  kill(signal: NodeJS.Signals): boolean {
    this.received.push(signal);
    return true;
  }
  end(code: number | null, signal: NodeJS.Signals | null = null): void {
    this.exitCode = code;
    this.emit('exit', code, signal);
  }
}

function supervise(application?: FakeApplication, early?: EarlySignals, given?: FakeSignals) {
  const signals = given ?? new FakeSignals();
  let refuse: ((refusal: ReplicaRefusal) => void) | undefined;
  let watching = false;
  const stops: number[] = [];
  const exits: number[] = [];
  const { logger, events } = recordingLogger();
  const done = superviseUntilStopped({
    logger,
    signals,
    ...(application ? { application } : {}),
    stop: async (code) => {
      stops.push(code);
      return code + 100;
    },
    exit: (code) => void exits.push(code),
    ...(early ? { early } : {}),
    watchRefusals: (onRefused) => {
      refuse = onRefused;
      watching = true;
      return () => {
        watching = false;
      };
    },
  });
  return {
    signals,
    stops,
    exits,
    events,
    done,
    refuse: (refusal: ReplicaRefusal) => refuse?.(refusal),
    watching: () => watching,
  };
}

const LINEAGE_REFUSAL: ReplicaRefusal = {
  database: '/data/app.db',
  replica: 'file:///backups',
  kind: 'lineage',
  reason: 'this backup prefix holds another database',
};

describe('superviseUntilStopped', () => {
  it('stops gracefully on the first SIGTERM (or SIGINT) and resolves with the stop’s code', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const run = supervise();
      run.signals.send(signal);
      expect(await run.done).toBe(EXIT_OK + 100);
      expect(run.stops).toEqual([EXIT_OK]);
      expect(run.exits).toEqual([]);
    }
  });

  it('acts on a signal held while replicate started, once supervision begins: a graceful stop', async () => {
    const signals = new FakeSignals();
    const seconds: NodeJS.Signals[] = [];
    const early = holdEarlySignals(signals, (signal) => seconds.push(signal));
    signals.send('SIGTERM');
    expect(seconds).toEqual([]);
    const run = supervise(undefined, early, signals);
    expect(await run.done).toBe(EXIT_OK + 100);
    expect(run.stops).toEqual([EXIT_OK]);
    expect(run.events().some((event) => event.event === 'backupd.signal_during_start')).toBe(true);
    // Held no longer: one listener per signal, supervision's own.
    expect(signals.listenerCount('SIGTERM')).toBe(1);
  });

  it('a second signal while replicate starts calls onSecond (the command exits at once)', () => {
    const signals = new FakeSignals();
    const seconds: NodeJS.Signals[] = [];
    const early = holdEarlySignals(signals, (signal) => seconds.push(signal));
    signals.send('SIGTERM');
    signals.send('SIGINT');
    expect(seconds).toEqual(['SIGINT']);
    expect(early.received).toEqual(['SIGTERM', 'SIGINT']);
    early.release();
    expect(signals.listenerCount('SIGINT')).toBe(0);
  });

  it('exits at once with 130 on a second signal, and stops only once', async () => {
    const run = supervise();
    run.signals.send('SIGTERM');
    run.signals.send('SIGINT');
    expect(run.exits).toEqual([EXIT_INTERRUPTED]);
    expect(run.stops).toEqual([EXIT_OK]);
    expect(run.events().find((event) => event.event === 'backupd.second_signal')).toMatchObject({
      signal: 'SIGINT',
    });
    await run.done;
  });

  it('forwards signals to a running application and stops with its code once it exits', async () => {
    const application = new FakeApplication();
    const run = supervise(application);
    run.signals.send('SIGHUP');
    run.signals.send('SIGTERM');
    expect(application.received).toEqual(['SIGHUP', 'SIGTERM']);
    expect(run.stops).toEqual([]);
    application.end(null, 'SIGTERM');
    expect(await run.done).toBe(143 + 100);
    expect(run.stops).toEqual([143]);
    expect(
      run.events().find((event) => event.event === 'backupd.application_exited'),
    ).toMatchObject({
      code: null,
      signal: 'SIGTERM',
    });
  });

  it('stops with the application’s exit code when it ends by itself', async () => {
    const application = new FakeApplication();
    const run = supervise(application);
    application.end(3);
    expect(await run.done).toBe(103);
    // Once it has exited, a signal stops backupd instead of being forwarded.
    run.signals.send('SIGTERM');
    expect(application.received).toEqual([]);
    expect(run.stops).toEqual([3]);
  });

  it('stops with 1 when the application cannot be started', async () => {
    const application = new FakeApplication();
    const run = supervise(application);
    application.emit('error', new Error('spawn /bin/sh ENOENT'));
    expect(await run.done).toBe(EXIT_FAILED + 100);
    expect(run.events().at(-1)).toMatchObject({ event: 'backupd.application_failed_to_start' });
  });

  it('stops with exit code 5 on a refusal no retry can clear, naming it, and stops watching', async () => {
    const run = supervise();
    expect(run.watching()).toBe(true);
    run.refuse(LINEAGE_REFUSAL);
    expect(await run.done).toBe(EXIT_PERMANENT_REFUSAL + 100);
    expect(run.stops).toEqual([EXIT_PERMANENT_REFUSAL]);
    expect(run.watching()).toBe(false);
    expect(run.events()).toContainEqual(
      expect.objectContaining({
        event: 'backupd.replica_refused',
        kind: 'lineage',
        database: '/data/app.db',
        reason: 'this backup prefix holds another database',
      }),
    );
  });

  it('names how to run best-effort, environment variable included, when the service ignores preconditions', async () => {
    const run = supervise();
    run.refuse({
      database: '/data/app.db',
      replica: 's3://bucket/app',
      kind: 'preconditions-ignored',
      reason: 'the service ignores If-None-Match',
    });
    expect(await run.done).toBe(EXIT_PERMANENT_REFUSAL + 100);
    const refused = run.events().find((event) => event.event === 'backupd.replica_refused');
    expect(refused?.fix).toContain('BACKUPD_CONDITIONAL=off');
    expect(refused?.fix).toContain('conditional: false');
  });

  it('stays up on a refusal while it supervises an application, and says so', async () => {
    const application = new FakeApplication();
    const run = supervise(application);
    run.refuse(LINEAGE_REFUSAL);
    await new Promise((resolve) => setImmediate(resolve));
    expect(run.stops).toEqual([]);
    expect(run.events()).toContainEqual(
      expect.objectContaining({ event: 'backupd.replica_refused', kind: 'lineage' }),
    );
    application.end(0);
    expect(await run.done).toBe(EXIT_OK + 100);
    expect(run.stops).toEqual([EXIT_OK]);
  });
});
