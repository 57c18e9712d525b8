/**
 * Meta-tests of `describeStoreConformance` itself: what vitest reports for
 * the suite it declares. The fixture suites in test/fixtures run in a child
 * vitest (its own process and configuration, with a JSON report), because
 * some of them must fail and a failing suite cannot be observed from inside
 * the run it fails.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conformanceCases } from '../src/index.ts';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const VITEST_BIN = join(
  dirname(createRequire(import.meta.url).resolve('vitest/package.json')),
  'vitest.mjs',
);
const DECLARED_NO_PUT =
  'a store that declares no conditional put refuses create and ifMatch with NotImplementedError';

interface AssertionResult {
  readonly title: string;
  readonly ancestorTitles: readonly string[];
  readonly status: 'passed' | 'failed' | 'skipped' | 'pending' | 'todo' | 'disabled';
  readonly failureMessages: readonly string[];
}
interface FileResult {
  readonly name: string;
  readonly status: 'passed' | 'failed';
  readonly message: string;
  readonly assertionResults: readonly AssertionResult[];
}

let directory = '';
let files: Map<string, FileResult>;

beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), 'conformance-describe-'));
  const report = join(directory, 'report.json');
  // The child must not believe it is a worker of this run.
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!name.startsWith('VITEST') && name !== 'TEST' && name !== 'NODE_ENV') env[name] = value;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        VITEST_BIN,
        'run',
        '--config',
        join(FIXTURES, 'vitest.config.ts'),
        '--reporter=json',
        `--outputFile=${report}`,
      ],
      { cwd: FIXTURES, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    // Exit code 1: some fixtures fail on purpose. Anything else is the harness.
    child.on('close', (code) =>
      code === 0 || code === 1
        ? resolve()
        : reject(new Error(`child vitest exited ${code}:\n${output}`)),
    );
  });
  const parsed = JSON.parse(await readFile(report, 'utf8')) as { testResults: FileResult[] };
  files = new Map(parsed.testResults.map((file) => [file.name.slice(FIXTURES.length), file]));
}, 120_000);

afterAll(() => rm(directory, { recursive: true, force: true }));

function fileResult(name: string): FileResult {
  const result = files.get(name);
  if (!result) throw new Error(`no result for ${name}; got ${[...files.keys()].join(', ')}`);
  return result;
}

function outcomes(name: string): Record<string, AssertionResult['status']> {
  return Object.fromEntries(
    fileResult(name).assertionResults.map((test) => [
      [...test.ancestorTitles, test.title].join(' > '),
      test.status,
    ]),
  );
}

describe('describeStoreConformance', () => {
  it('with a capability declared off runs every other case, and the run passes (no empty group fails it)', () => {
    const file = fileResult('capability-off.fixture.ts');
    expect(file.message).toBe('');
    expect(file.status).toBe('passed');
    const statuses = outcomes('capability-off.fixture.ts');
    const suite = 'store conformance: MemoryStore told conditionalPut is off';
    // No group is declared without a case in it: replace and races need conditional put.
    const groups = new Set(Object.keys(statuses).map((title) => title.split(' > ')[1]));
    expect([...groups].sort()).toEqual(
      ['abort', 'basics', 'create', 'delete', 'multipart-create'].sort(),
    );
    const needingPut = conformanceCases.filter((testCase) =>
      testCase.requires?.some((r) => r.capability === 'conditionalPut' && r.value),
    );
    for (const testCase of needingPut)
      expect(statuses[`${suite} > ${testCase.group} > ${testCase.name}`]).toBeUndefined();
    expect(Object.values(statuses).filter((status) => status === 'failed')).toEqual([]);
    expect(statuses[`${suite} > create > ${DECLARED_NO_PUT}`]).toBe('skipped');
  });

  it('never passes the declared-absent case without checking: a content-hash store that declares conditional put, told it is off, is skipped', () => {
    expect(outcomes('content-hash-capability-off.fixture.ts')).toEqual({
      [`store conformance: content-hash store told conditionalPut is off > create > ${DECLARED_NO_PUT}`]:
        'skipped',
    });
  });

  it('fails the declared-absent case for a content-hash store that declares no conditional put yet accepts create and ifMatch', () => {
    const file = fileResult('declares-no-conditional-put.fixture.ts');
    expect(outcomes('declares-no-conditional-put.fixture.ts')).toEqual({
      [`store conformance: refusing > create > ${DECLARED_NO_PUT}`]: 'passed',
      [`store conformance: lying > create > ${DECLARED_NO_PUT}`]: 'failed',
    });
    const lying = file.assertionResults.find((test) =>
      test.ancestorTitles.includes('store conformance: lying'),
    );
    expect(lying?.failureMessages.join('\n')).toMatch(
      /create on a store without conditional put: expected NotImplementedError, but it succeeded/,
    );
  });

  it('fails, saying so, when no case applies at all', () => {
    const file = fileResult('nothing-applies.fixture.ts');
    expect(file.status).toBe('failed');
    expect(file.assertionResults).toHaveLength(1);
    expect(file.assertionResults[0]?.title).toBe('has a case to run');
    expect(file.assertionResults[0]?.failureMessages.join('\n')).toMatch(
      /no conformance case applies to groups replace with capabilities \{"conditionalPut":false/,
    );
  });
});
