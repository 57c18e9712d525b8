/**
 * The processes under test: `backupd` commands (one-shot: verify, ls,
 * restore) and the two long-running `backupd replicate` replicas, each
 * incarnation with its own proxy port so the proxy's write log tells them
 * apart without their cooperation.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repositoryRoot = fileURLToPath(new URL('..', import.meta.url));
const backupdBin = join(repositoryRoot, 'apps', 'backupd', 'bin', 'backupd.js');

export type Env = Record<string, string | undefined>;

export interface CommandResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs one `backupd` command to completion (killed after `timeoutMs`). */
export function runBackupd(
  args: readonly string[],
  env: Env,
  timeoutMs = 120_000,
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [backupdBin, ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Parses a command's `--json` output, or says what came out instead. */
export function parseJsonOutput<T>(result: CommandResult, what: string): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(
      `${what}: exit ${result.code ?? result.signal}, no JSON on stdout: ${result.stdout.slice(0, 300)} ${lastLines(result.stderr, 8)}`,
    );
  }
}

export function lastLines(text: string, count: number): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}

export interface UnexpectedExit {
  readonly tag: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly logTail: string;
  readonly at: number;
}

/**
 * One replica slot ("A" or "B"): at most one live `backupd replicate`
 * process at a time; every start is a new incarnation (`A1`, `A2`, …) with a
 * new proxy port and its own log file.
 */
export class Replica {
  readonly name: string;
  readonly #start: (tag: string) => Promise<{ url: string }>;
  readonly #databasePath: string;
  readonly #env: Env;
  readonly #logDirectory: string;
  readonly unexpectedExits: UnexpectedExit[];
  #incarnation = 0;
  #child: ChildProcess | null = null;
  #expectExit = false;
  #starting = false;
  #exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | null = null;
  tag = '';
  logPath = '';
  starts = 0;
  kills = 0;

  constructor(options: {
    name: string;
    databasePath: string;
    env: Env;
    logDirectory: string;
    /** Gives the store URL for a new incarnation's proxy port. */
    urlFor: (tag: string) => Promise<{ url: string }>;
    unexpectedExits: UnexpectedExit[];
  }) {
    this.name = options.name;
    this.#start = options.urlFor;
    this.#databasePath = options.databasePath;
    this.#env = options.env;
    this.#logDirectory = options.logDirectory;
    this.unexpectedExits = options.unexpectedExits;
  }

  /** Running, or being started (so a second start is never attempted). */
  get alive(): boolean {
    return this.#child !== null || this.#starting;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  async start(): Promise<void> {
    if (this.alive) throw new Error(`${this.tag} is already running`);
    this.#starting = true;
    this.#incarnation += 1;
    this.starts += 1;
    const tag = `${this.name}${this.#incarnation}`;
    let url: string;
    try {
      ({ url } = await this.#start(tag));
    } finally {
      this.#starting = false;
    }
    this.tag = tag;
    this.logPath = join(this.#logDirectory, `${tag}.log`);
    const log = openSync(this.logPath, 'a');
    const child = spawn(
      process.execPath,
      [backupdBin, 'replicate', this.#databasePath, url, '--log-format', 'json'],
      { env: this.#env, stdio: ['ignore', log, log] },
    );
    closeSync(log);
    this.#child = child;
    this.#expectExit = false;
    this.#exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        if (this.#child === child) this.#child = null;
        if (!this.#expectExit) {
          this.unexpectedExits.push({
            tag,
            code,
            signal,
            logTail: lastLines(readFileSync(join(this.#logDirectory, `${tag}.log`), 'utf8'), 12),
            at: Date.now(),
          });
        }
        resolve({ code, signal });
      });
    });
  }

  /** SIGKILL: no flush, no release; the lease must expire before anyone takes over. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#expectExit = true;
    this.kills += 1;
    child.kill('SIGKILL');
    await this.#exited;
  }

  /** SIGTERM and wait: the graceful shutdown. Resolves with the exit code. */
  async terminate(
    timeoutMs: number,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null } | null> {
    const child = this.#child;
    if (!child) return null;
    this.#expectExit = true;
    child.kill('SIGTERM');
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
    });
    const result = await Promise.race([this.#exited!, timedOut]);
    clearTimeout(timer);
    if (result === null) {
      child.kill('SIGKILL');
      await this.#exited;
    }
    return result;
  }
}
