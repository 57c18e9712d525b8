/**
 * The examples/ suites run as an outside author runs them (vitest over
 * `*.test.mjs`, importing the package by name), in a child vitest with a
 * JSON report: the tiny HTTP backend passes every case, and the same backend
 * on a server that ignores If-Match on DELETE fails exactly the
 * conditional-delete cases and its probe.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const EXAMPLES = fileURLToPath(new URL('../examples/', import.meta.url));
const CONFIG = fileURLToPath(new URL('./examples.vitest.config.ts', import.meta.url));
const VITEST_BIN = join(
  dirname(createRequire(import.meta.url).resolve('vitest/package.json')),
  'vitest.mjs',
);

interface AssertionResult {
  readonly title: string;
  readonly status: string;
  readonly failureMessages: readonly string[];
}
interface FileResult {
  readonly name: string;
  readonly status: 'passed' | 'failed';
  readonly assertionResults: readonly AssertionResult[];
}

let directory = '';
let files: Map<string, FileResult>;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'conformance-examples-'));
  const report = join(directory, 'report.json');
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!name.startsWith('VITEST') && name !== 'TEST' && name !== 'NODE_ENV') env[name] = value;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [VITEST_BIN, 'run', '--config', CONFIG, '--reporter=json', `--outputFile=${report}`],
      { cwd: EXAMPLES, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    // Exit code 1: the broken example fails on purpose.
    child.on('close', (code) =>
      code === 0 || code === 1
        ? resolve()
        : reject(new Error(`child vitest exited ${code}:\n${output}`)),
    );
  });
  const parsed = JSON.parse(await readFile(report, 'utf8')) as { testResults: FileResult[] };
  files = new Map(parsed.testResults.map((file) => [file.name.slice(EXAMPLES.length), file]));
}, 180_000);

afterAll(() => rm(directory, { recursive: true, force: true }));

describe('the examples/ backend', () => {
  it('every suite in examples/ is checked here', async () => {
    const suites = (await readdir(EXAMPLES)).filter((name) => name.endsWith('.test.mjs'));
    expect(suites.sort()).toEqual([
      'tiny-http-store-broken.conformance.test.mjs',
      'tiny-http-store.conformance.test.mjs',
    ]);
    expect([...files.keys()].sort()).toEqual(suites.sort());
  });

  it('passes every case and the probe, with its own server started in createStore', () => {
    const file = files.get('tiny-http-store.conformance.test.mjs')!;
    const failed = file.assertionResults.filter((result) => result.status !== 'passed');
    expect(failed.map((result) => result.title)).toEqual([]);
    expect(file.assertionResults.length).toBeGreaterThan(30);
    expect(file.status).toBe('passed');
  });

  it('fails exactly the conditional-delete cases and the probe when the server ignores If-Match on DELETE', () => {
    const file = files.get('tiny-http-store-broken.conformance.test.mjs')!;
    expect(file.status).toBe('failed');
    const failed = file.assertionResults.filter((result) => result.status === 'failed');
    expect(failed.map((result) => result.title).sort()).toEqual([
      'conditional delete of a missing key fails with PreconditionFailedError',
      'conditional delete with a stale version fails with PreconditionFailedError and keeps the object',
      'honours every conditional write, by behaviour',
    ]);
    expect(failed[0]!.failureMessages.join('\n')).toMatch(
      /expected PreconditionFailedError, but it succeeded/,
    );
  });
});
