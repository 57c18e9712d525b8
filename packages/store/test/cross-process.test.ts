/**
 * FsStore's conditional writes are atomic across processes, not only within
 * one: child processes (separate Node processes, separate FsStore objects,
 * no shared memory) race on one key.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FsStore } from '../src/index.ts';

const fixtures = join(import.meta.dirname, 'fixtures');
let root = '';

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'fs-store-processes-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Child {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly result: Promise<string>;
}

/** Starts a fixture; `ready` resolves when it waits at its barrier, `result` with its last line. */
function startChild(script: string, args: string[]): Child {
  const child = spawn(
    process.execPath,
    ['--conditions=@x/source', join(fixtures, script), ...args],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    if (stdout.includes('ready\n')) markReady();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const result = new Promise<string>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`${script} exited with ${code}: ${stderr}`));
      else resolve(stdout.trim().split('\n').at(-1)!);
    });
  });
  return { process: child, ready, result };
}

async function runTogether(children: Child[]): Promise<string[]> {
  await Promise.all(children.map((child) => child.ready));
  for (const child of children) child.process.stdin!.end('go\n');
  return Promise.all(children.map((child) => child.result));
}

async function leftoverInternalFiles(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.filter(
    (name) => name.includes('~tmp.') || name.includes('~lock') || name.includes('~stale.'),
  );
}

describe('FsStore across processes', () => {
  it('8 processes × 50 ifMatch increments of one key with retry reach exactly 400', async () => {
    const store = new FsStore({ root });
    await store.put('counter', new TextEncoder().encode('0'), { mode: 'create' });
    const children = Array.from({ length: 8 }, () =>
      startChild('increment.ts', [root, 'counter', '50']),
    );
    const lines = await runTogether(children);
    const reports = lines.map((line) => JSON.parse(line) as { done: number; retries: number });
    expect(reports.map((report) => report.done)).toEqual(Array(8).fill(50));
    const final = await store.get('counter');
    expect(new TextDecoder().decode(final!.body)).toBe('400');
    // Contention really happened, or the test proved nothing about atomicity.
    expect(reports.reduce((sum, report) => sum + report.retries, 0)).toBeGreaterThan(0);
    expect(await leftoverInternalFiles(root)).toEqual([]);
  });

  it('16 processes racing a create of one key: exactly one wins and its content stays', async () => {
    const children = Array.from({ length: 16 }, () =>
      startChild('create-race.ts', [root, 'contested/key']),
    );
    const lines = await runTogether(children);
    const reports = lines.map((line) => JSON.parse(line) as { won: boolean; pid: number });
    const winners = reports.filter((report) => report.won);
    expect(winners).toHaveLength(1);
    const stored = await new FsStore({ root }).get('contested/key');
    expect(new TextDecoder().decode(stored!.body)).toBe(String(winners[0]!.pid));
    expect(await leftoverInternalFiles(root)).toEqual([]);
  });
});
