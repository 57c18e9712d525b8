/**
 * `--exec`: the application backupd runs as its child, and the exit code its
 * end stands for.
 */
import { spawn } from 'node:child_process';
import { EXIT_FAILED } from '../exit-codes.ts';

/** What replicate needs of the application's process (a ChildProcess; tests pass a fake). */
export interface Application {
  readonly pid?: number;
  /** null while it runs. */
  readonly exitCode: number | null;
  kill(signal: NodeJS.Signals): boolean;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
}

/**
 * Starts `command` through `sh -c "exec <command>"`: the shell replaces
 * itself with the application, so the signals replicate forwards reach the
 * application, not a shell around it.
 */
export function startApplication(command: string): Application {
  return spawn('/bin/sh', ['-c', `exec ${command}`], { stdio: 'inherit' });
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGKILL: 9,
  SIGTERM: 15,
};

/** The application's exit code, or 128 + the signal's number when a signal ended it (as a shell reports it). */
export function applicationExitCode(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  if (signal) return 128 + (SIGNAL_NUMBERS[signal] ?? 1);
  return EXIT_FAILED;
}
