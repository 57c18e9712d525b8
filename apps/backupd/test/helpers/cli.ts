/**
 * Running the real `backupd` command as child processes, the way operators
 * do: `node apps/backupd/bin/backupd.js …` with a chosen environment. Every
 * byte a child writes is kept (`output`), so tests can assert on it and the
 * canary test can grep all of it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3TestServer } from '@x/test-servers';
import { afterAll } from 'vitest';

export const BACKUPD_BIN = fileURLToPath(new URL('../../bin/backupd.js', import.meta.url));
export const WRITER = fileURLToPath(new URL('../fixtures/writer.ts', import.meta.url));

export type Env = Record<string, string | undefined>;

/** The parent's environment without anything that could point the child at a real cloud account. */
export function baseEnv(extra: Env = {}): Env {
  const env: Env = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(AWS_|AZURE_|GOOGLE_|GCLOUD_|BACKUPD_)/.test(name)) continue;
    env[name] = value;
  }
  // Keep the SDKs away from ~/.aws and instance metadata.
  env.AWS_CONFIG_FILE = '/dev/null';
  env.AWS_SHARED_CREDENTIALS_FILE = '/dev/null';
  env.AWS_EC2_METADATA_DISABLED = 'true';
  // The tests run many processes on few cores at once; a backupd at its
  // default (idle) priority would wait behind all of them. cpu-priority.test.ts
  // runs the default.
  env.BACKUPD_CPU_PRIORITY = 'normal';
  return { ...env, ...extra };
}

/** The environment that lets backupd reach an S3 test server. */
export function s3Env(server: S3TestServer, extra: Env = {}): Env {
  return baseEnv({
    AWS_ACCESS_KEY_ID: server.accessKeyId,
    AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
    ...extra,
  });
}

export function s3Url(server: S3TestServer, prefix: string): string {
  const endpoint = encodeURIComponent(server.endpoint);
  return `s3://${server.bucket}/${prefix}?endpoint=${endpoint}&forcePathStyle=true&region=${server.region || 'us-east-1'}`;
}

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Every output of every command run in this test file, for the canary greps. */
export const transcript: string[] = [];

/** Runs `backupd <args>` to completion. */
export function runCli(
  args: readonly string[],
  options: { env: Env; cwd?: string; timeoutMs?: number },
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BACKUPD_BIN, ...args], {
      env: options.env as NodeJS.ProcessEnv,
      cwd: options.cwd,
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
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `backupd ${args.join(' ')} did not finish in ${options.timeoutMs ?? 30_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, options.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      transcript.push(stdout, stderr);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A long-running child (`backupd replicate`, the writer). */
export class RunningProcess {
  readonly child: ChildProcess;
  readonly label: string;
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    label: string,
    command: string,
    args: readonly string[],
    /** `stdin: true` gives the child a pipe (`child.stdin`) instead of no input. */
    options: { env: Env; cwd?: string; stdin?: boolean },
  ) {
    this.label = label;
    this.child = spawn(command, args, {
      env: options.env as NodeJS.ProcessEnv,
      cwd: options.cwd,
      stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      this.child.on('close', (code, signal) => {
        transcript.push(this.stdout, this.stderr);
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The JSON log lines written so far (lines that do not parse are skipped). */
  logEvents(): Record<string, unknown>[] {
    return this.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
  }

  /** Sends `signal` and waits for the exit (SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000) {
    if (!this.running) return this.exited;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const result = await this.exited;
    clearTimeout(timer);
    return result;
  }

  describe(): string {
    return `${this.label} (pid ${this.child.pid})\n--- stdout\n${this.stdout}\n--- stderr\n${this.stderr}`;
  }
}

export function startBackupd(
  args: readonly string[],
  options: { env: Env; cwd?: string; label?: string },
) {
  return new RunningProcess(
    options.label ?? `backupd ${args[0]}`,
    process.execPath,
    [BACKUPD_BIN, ...args],
    options,
  );
}

export function startWriter(databasePath: string, recordsPath: string, pauseMs = 5) {
  return new RunningProcess(
    'writer',
    process.execPath,
    [WRITER, databasePath, recordsPath, String(pauseMs)],
    {
      env: baseEnv(),
    },
  );
}

/** Polls `condition` until it returns a truthy value; fails with `describe()` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  condition: () => Promise<T | undefined | false> | T | undefined | false,
  options: { timeoutMs?: number; intervalMs?: number; describe?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}${options.describe ? `\n${options.describe()}` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100));
  }
}

export async function getText(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: response.status, body: await response.text() };
}

/**
 * The status listener's URL, from the `listening` log event. backupd is
 * started with `--listen 127.0.0.1:0`, so the kernel picks a free port and no
 * other process can take it between choosing and binding.
 */
export function listeningUrl(process: RunningProcess, timeoutMs = 20_000): Promise<string> {
  return waitFor(
    `${process.label} to listen`,
    () => {
      const event = process.logEvents().find((line) => line.event === 'backupd.listening');
      return typeof event?.url === 'string' ? event.url : undefined;
    },
    { timeoutMs, describe: () => process.describe() },
  );
}

/** The instance id a `backupd replicate` process logged when its worker started. */
export function instanceIdOf(process: RunningProcess): string | undefined {
  const event = process.logEvents().find((line) => line.event === 'backupd.replica_started');
  return typeof event?.instanceId === 'string' ? event.instanceId : undefined;
}

/** One sample of a Prometheus text exposition, matched by metric name and label subset. */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return undefined;
}

/** Creates a WAL-mode SQLite database with a few rows (for tests that need a database, not a writer). */
export async function createWalDatabase(path: string): Promise<void> {
  const { DatabaseSync } = await import('node:sqlite');
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  for (let index = 0; index < 20; index += 1)
    database.prepare('INSERT INTO notes (body) VALUES (?)').run(`note ${index}`);
  database.close();
}

/**
 * A fresh temporary directory for one suite, and the list its tests push the
 * processes they start onto. After the suite every listed process is killed
 * (SIGKILL: a test that failed half-way leaves nothing running) and the
 * directory is removed. Call it inside the suite's `describe`.
 */
export function suiteWorkspace(label: string): {
  readonly directory: string;
  readonly running: RunningProcess[];
} {
  const directory = mkdtempSync(join(tmpdir(), `backupd-${label}-`));
  const running: RunningProcess[] = [];
  afterAll(async () => {
    await Promise.all(running.map((process) => process.stop('SIGKILL')));
    rmSync(directory, { recursive: true, force: true });
  });
  return { directory, running };
}
