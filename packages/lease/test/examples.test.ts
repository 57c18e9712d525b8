/**
 * The files in examples/ (the README's examples among them) run as a user
 * runs them: `node examples/<name>.mjs`, importing `@x/lease` and `@x/store`
 * by name. Here the names resolve to this repository's sources (the
 * `@x/source` condition); the packed tarballs are installed and run outside
 * the repository by CI.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const directories: string[] = [];

async function run(
  name: string,
  leaseDir?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dir = leaseDir ?? (await mkdtemp(join(tmpdir(), 'lease-example-')));
  directories.push(dir);
  const child = spawn(
    process.execPath,
    ['--conditions=@x/source', join('examples', `${name}.mjs`)],
    {
      cwd: PACKAGE_ROOT,
      env: { ...process.env, LEASE_DIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr };
}

afterAll(() => Promise.all(directories.map((dir) => rm(dir, { recursive: true, force: true }))));

// Each example named here must also be run below; the list is checked against the folder.
const EXAMPLES = [
  'contend',
  'fake-clock',
  'hold',
  'sigkill-takeover',
  'sigterm-handover',
  'wait-with-deadline',
  'worker-loop',
];

describe('lease examples', { timeout: 60_000 }, () => {
  it('every file in examples/ is run by this test', async () => {
    const files = (await readdir(join(PACKAGE_ROOT, 'examples'))).filter((f) => f.endsWith('.mjs'));
    expect(files.map((file) => file.replace(/\.mjs$/, '')).sort()).toEqual(EXAMPLES);
  });

  it('hold: runs twice in a row on one store, each run writing under its own generation', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lease-example-'));
    const first = await run('hold', dir);
    const second = await run('hold', dir);
    expect(first).toMatchObject({ code: 0, stdout: 'wrote jobs/nightly/out-1\n' });
    expect(second).toMatchObject({ code: 0, stdout: 'wrote jobs/nightly/out-2\n' });
  });

  it.concurrent('contend: exactly one of two processes holds the lease', async () => {
    const result = await run('contend');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/exactly one of two processes held the lease/);
    expect(result.stdout.match(/holds it/g)).toHaveLength(1);
    expect(result.stdout.match(/refused, held by pid/g)).toHaveLength(1);
  });

  it.concurrent('sigkill-takeover: taken over only after a full TTL', async () => {
    const result = await run('sigkill-takeover');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/right after the kill: still held by the dead process/);
    expect(result.stdout).toMatch(/generation 1 -> 2/);
  });

  it.concurrent('sigterm-handover: the holder releases on SIGTERM, the waiter takes over', async () => {
    const result = await run('sigterm-handover');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/holder exited with 0; taken over at generation 2/);
  });

  it.concurrent('wait-with-deadline: times out, then takes the released lease', async () => {
    const result = await run('wait-with-deadline');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/gave up: lease jobs\/report\/LEASE: not free within 2000 ms/);
    expect(result.stdout).toMatch(/took the lease: generation 2/);
  });

  it.concurrent('worker-loop: pauses while renewals are late and writes every item', async () => {
    const result = await run('worker-loop');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/wrote 20 items; paused [1-9]\d* time\(s\)/);
  });

  it.concurrent('fake-clock: prints false then true', async () => {
    const result = await run('fake-clock');
    expect(result).toMatchObject({ code: 0, stdout: 'false\ntrue\n', stderr: '' });
  });
});
