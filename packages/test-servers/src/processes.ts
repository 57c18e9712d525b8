/**
 * Child-process plumbing for the test servers: free ports, spawning with the
 * output sent to a log file (never to the console), readiness waits, and
 * stopping. Every child is also killed when this process exits, so an
 * interrupted run does not leave servers behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

/** Asks the kernel for a free port on 127.0.0.1 (the small race until the server binds is accepted). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not read the port of a probe socket'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

export interface RunningProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Set when the process has exited. */
  exited(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

const directoriesToRemove = new Set<string>();

/** Removes `directory` when this process exits, unless {@link forgetDirectory} is called first. */
export function removeOnExit(directory: string): void {
  installExitHook();
  directoriesToRemove.add(directory);
}

export function forgetDirectory(directory: string): void {
  directoriesToRemove.delete(directory);
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of running) {
      // Best effort on the way out: the process may have gone already.
      try {
        child.kill('SIGKILL');
      } catch {}
    }
    for (const directory of directoriesToRemove) {
      // Best effort too: a leftover temporary directory is harmless.
      try {
        rmSync(directory, { recursive: true, force: true });
      } catch {}
    }
  });
}

export function spawnServer(
  name: string,
  command: string,
  args: readonly string[],
  options: { logFile: string; env?: NodeJS.ProcessEnv; cwd?: string },
): RunningProcess {
  installExitHook();
  const logFd = openSync(options.logFile, 'a');
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  running.add(child);
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exitedPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      running.delete(child);
      resolve();
    });
    child.once('error', (error) => {
      exit = { code: null, signal: null };
      running.delete(child);
      // The spawn itself failed (e.g. ENOENT); kept for the startup error message.
      spawnErrors.set(child, error);
      resolve();
    });
  });
  return {
    name,
    child,
    logFile: options.logFile,
    exited: () => exit,
    async stop() {
      if (exit) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exitedPromise;
      clearTimeout(timer);
    },
  };
}

const spawnErrors = new WeakMap<ChildProcess, Error>();

/** The last lines of a server's log, for error messages. */
export function logTail(process: RunningProcess, lines = 15): string {
  const spawnError = spawnErrors.get(process.child);
  let text = '';
  try {
    text = readFileSync(process.logFile, 'utf8');
  } catch {
    // No log yet: the process never wrote one.
  }
  const tail = text.trimEnd().split('\n').slice(-lines).join('\n');
  return [spawnError ? `spawn failed: ${spawnError.message}` : '', tail].filter(Boolean).join('\n');
}

/**
 * Polls `url` until any HTTP answer arrives (`accept` decides which statuses
 * mean ready). Fails early when the process exits, and after `timeoutMs`.
 */
export async function waitForHttp(
  process: RunningProcess,
  url: string,
  options: { timeoutMs?: number; accept?: (status: number) => boolean } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  const accept = options.accept ?? (() => true);
  let lastProblem = 'no answer yet';
  while (Date.now() < deadline) {
    const exit = process.exited();
    if (exit) {
      throw new Error(
        `${process.name} exited during startup (code ${exit.code}, signal ${exit.signal}):\n${logTail(process)}`,
      );
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (accept(response.status)) return;
      lastProblem = `status ${response.status}`;
    } catch (error) {
      lastProblem = error instanceof Error ? error.message : String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `${process.name} was not ready at ${url} in time (${lastProblem}):\n${logTail(process)}`,
  );
}
