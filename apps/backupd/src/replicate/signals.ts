/**
 * How replicate runs until it stops:
 * - the first SIGTERM or SIGINT starts the graceful stop, or, with an
 *   application still running, is forwarded to it (backupd stops when it
 *   exits); SIGHUP is forwarded to the application;
 * - a second SIGTERM or SIGINT exits at once with code 130;
 * - the application's exit stops backupd with the application's code
 *   (1 when it could not be started);
 * - without an application, a replica's refusal that no retry can clear
 *   stops backupd with code 5 (with one, backupd stays up and logs it).
 * The stop runs once, whatever triggers it first; a signal received while
 * replicate started is acted on as supervision begins ({@link holdEarlySignals}).
 */
import { BEST_EFFORT_ADVICE } from '../best-effort-advice.ts';
import { EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PERMANENT_REFUSAL } from '../exit-codes.ts';
import { errorFields, type Logger } from '../logger.ts';
import { type Application, applicationExitCode } from './application.ts';
import type { ReplicaRefusal } from './refusals.ts';

/** Where signals arrive: `process` in the command. */
export interface SignalSource {
  on(signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP', listener: (signal: NodeJS.Signals) => void): unknown;
}

/** Stop signals received before the supervision began. */
export interface EarlySignals {
  /** The signals received so far, in order. */
  readonly received: readonly NodeJS.Signals[];
  /** Stops holding: later signals go to whoever listens then. */
  release(): void;
}

/**
 * Holds SIGTERM and SIGINT from now until {@link superviseUntilStopped}
 * takes over (or `release()`): without a listener, SIGTERM's default action
 * would end the process before any stop could run. A second one meanwhile
 * calls `onSecond` (the command exits at once, as under supervision).
 */
export function holdEarlySignals(
  signals: SignalSource & {
    off(signal: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  },
  onSecond: (signal: NodeJS.Signals) => void,
): EarlySignals {
  const received: NodeJS.Signals[] = [];
  const listener = (signal: NodeJS.Signals) => {
    received.push(signal);
    if (received.length > 1) onSecond(signal);
  };
  signals.on('SIGTERM', listener);
  signals.on('SIGINT', listener);
  return {
    received,
    release() {
      signals.off('SIGTERM', listener);
      signals.off('SIGINT', listener);
    },
  };
}

export interface Supervision {
  readonly logger: Logger;
  readonly signals: SignalSource;
  readonly application?: Application;
  /** The graceful stop, given the code asked for; resolves with the exit code. Never rejects. */
  readonly stop: (code: number) => Promise<number>;
  /** Ends the process at once (a second signal). */
  readonly exit: (code: number) => void;
  /**
   * Watches for a refusal no retry can clear (see refusals.ts): without an
   * application it stops replicate with `EXIT_PERMANENT_REFUSAL`; with one,
   * replicate stays up (unhealthy, with the reason) and says so once.
   */
  readonly watchRefusals?: (onRefused: (refusal: ReplicaRefusal) => void) => () => void;
  /** Signals held while replicate started: acted on as soon as supervision begins. */
  readonly early?: EarlySignals;
}

/** Resolves with the exit code once the stop has finished. */
export function superviseUntilStopped(supervision: Supervision): Promise<number> {
  const { logger, signals, application } = supervision;
  return new Promise((resolve) => {
    let stopping = false;
    let stopWatching: (() => void) | undefined;
    const stopOnce = (code: number) => {
      if (stopping) return;
      stopping = true;
      stopWatching?.();
      void supervision.stop(code).then(resolve);
    };
    let received = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      received += 1;
      if (received > 1) {
        logger.warn({
          event: 'backupd.second_signal',
          signal,
          note: 'exiting without finishing the shutdown',
        });
        supervision.exit(EXIT_INTERRUPTED);
        return;
      }
      if (application && application.exitCode === null) {
        application.kill(signal);
        return;
      }
      stopOnce(EXIT_OK);
    };
    signals.on('SIGTERM', onSignal);
    signals.on('SIGINT', onSignal);
    supervision.early?.release();
    stopWatching = supervision.watchRefusals?.((refusal) => {
      const fields = {
        event: 'backupd.replica_refused',
        database: refusal.database,
        replica: refusal.replica,
        kind: refusal.kind,
        reason: refusal.reason,
        ...(refusal.kind === 'preconditions-ignored' ? { fix: BEST_EFFORT_ADVICE } : {}),
      };
      if (application) {
        logger.error({
          ...fields,
          note: 'backupd stays up while it supervises the application; this replica uploads nothing',
        });
        return;
      }
      logger.error({ ...fields, note: `stopping with exit code ${EXIT_PERMANENT_REFUSAL}` });
      stopOnce(EXIT_PERMANENT_REFUSAL);
    });
    const held = supervision.early?.received ?? [];
    if (held.length > 0)
      logger.info({
        event: 'backupd.signal_during_start',
        signal: held[0],
        note: 'received while replicate was starting; acted on now',
      });
    for (const signal of held) onSignal(signal);
    if (!application) return;
    signals.on('SIGHUP', () => application.kill('SIGHUP'));
    application.on('exit', (code, signal) => {
      logger.info({ event: 'backupd.application_exited', code, signal });
      stopOnce(applicationExitCode(code, signal));
    });
    application.on('error', (error) => {
      logger.error({ event: 'backupd.application_failed_to_start', ...errorFields(error) });
      stopOnce(EXIT_FAILED);
    });
  });
}
