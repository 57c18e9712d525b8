/**
 * `--exec`: the application backupd runs as its child, and the exit code its
 * end stands for.
 */
import { type ChildProcess, spawn } from 'node:child_process';
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
  return new RememberedExit(spawn('/bin/sh', ['-c', `exec ${command}`], { stdio: 'inherit' }));
}

/**
 * The child, with its end remembered: a listener added after the
 * application exited (replicate waiting for a first boot's database, then
 * starting its workers) still hears of it, at once.
 */
class RememberedExit implements Application {
  readonly #child: ChildProcess;
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  #error: Error | undefined;
  readonly #exitListeners: ((code: number | null, signal: NodeJS.Signals | null) => void)[] = [];
  readonly #errorListeners: ((error: Error) => void)[] = [];

  constructor(child: ChildProcess) {
    this.#child = child;
    child.on('exit', (code, signal) => {
      this.#exit = { code, signal };
      for (const listener of this.#exitListeners) listener(code, signal);
    });
    child.on('error', (error) => {
      this.#error = error;
      for (const listener of this.#errorListeners) listener(error);
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Once it ended: its code, or (ended by a signal, or never started) not null either. */
  get exitCode(): number | null {
    if (this.#exit) return this.#exit.code ?? applicationExitCode(null, this.#exit.signal);
    return this.#error ? EXIT_FAILED : null;
  }

  kill(signal: NodeJS.Signals): boolean {
    return this.#child.kill(signal);
  }

  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(
    event: 'exit' | 'error',
    listener:
      | ((code: number | null, signal: NodeJS.Signals | null) => void)
      | ((error: Error) => void),
  ): this {
    if (event === 'exit') {
      const onExit = listener as (code: number | null, signal: NodeJS.Signals | null) => void;
      this.#exitListeners.push(onExit);
      const exit = this.#exit;
      if (exit) queueMicrotask(() => onExit(exit.code, exit.signal));
    } else {
      const onError = listener as (error: Error) => void;
      this.#errorListeners.push(onError);
      const error = this.#error;
      if (error) queueMicrotask(() => onError(error));
    }
    return this;
  }
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
