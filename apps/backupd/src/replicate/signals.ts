/**
 * How replicate runs until it stops:
 * - the first SIGTERM or SIGINT starts the graceful stop, or, with an
 *   application still running, is forwarded to it (backupd stops when it
 *   exits); SIGHUP is forwarded to the application;
 * - a second SIGTERM or SIGINT exits at once with code 130;
 * - the application's exit stops backupd with the application's code
 *   (1 when it could not be started).
 * The stop runs once, whatever triggers it first.
 */
import { EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK } from '../exit-codes.ts';
import { errorFields, type Logger } from '../logger.ts';
import { type Application, applicationExitCode } from './application.ts';

/** Where signals arrive: `process` in the command. */
export interface SignalSource {
  on(signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP', listener: (signal: NodeJS.Signals) => void): unknown;
}

export interface Supervision {
  readonly logger: Logger;
  readonly signals: SignalSource;
  readonly application?: Application;
  /** The graceful stop, given the code asked for; resolves with the exit code. Never rejects. */
  readonly stop: (code: number) => Promise<number>;
  /** Ends the process at once (a second signal). */
  readonly exit: (code: number) => void;
}

/** Resolves with the exit code once the stop has finished. */
export function superviseUntilStopped(supervision: Supervision): Promise<number> {
  const { logger, signals, application } = supervision;
  return new Promise((resolve) => {
    let stopping = false;
    const stopOnce = (code: number) => {
      if (stopping) return;
      stopping = true;
      void supervision.stop(code).then(resolve);
    };
    let received = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      received += 1;
      if (received > 1) {
        logger.warn({
          event: 'second-signal',
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
    if (!application) return;
    signals.on('SIGHUP', () => application.kill('SIGHUP'));
    application.on('exit', (code, signal) => {
      logger.info({ event: 'application-exited', code, signal });
      stopOnce(applicationExitCode(code, signal));
    });
    application.on('error', (error) => {
      logger.error({ event: 'application-failed-to-start', ...errorFields(error) });
      stopOnce(EXIT_FAILED);
    });
  });
}
