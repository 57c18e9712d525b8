/**
 * `backupd restore` of a SQLite database (the default type) and `replicate
 * --restore-if-missing` say so when LATEST is unusable and they restore the
 * newest restore point that passes restore's checks instead. The prefix is
 * the previous release's SQLite fixture (packages/integration-tests/fixtures),
 * with LATEST overwritten by garbage.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { FsStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli } from './helpers/cli.ts';
import { databaseHash } from './helpers/content-hash.ts';

const FIXTURE = fileURLToPath(
  new URL('../../../packages/integration-tests/fixtures/old-release/sqlite/', import.meta.url),
);
const expected = JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8')) as {
  latest: { commitSeq: number; contentHash: string };
};
const directory = mkdtempSync(join(tmpdir(), 'backupd-restore-fallback-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** A copy of the fixture prefix whose LATEST holds garbage; its file:// URL. */
async function brokenCopy(label: string): Promise<string> {
  const root = join(directory, label);
  cpSync(join(FIXTURE, 'prefix'), root, { recursive: true });
  await new FsStore({ root, fsync: false }).put(
    'backup/LATEST',
    new TextEncoder().encode('not a LATEST at all'),
    { mode: 'overwrite' },
  );
  return pathToFileURL(root).href;
}

describe('a restore whose LATEST is unusable', () => {
  it('restore of a database warns on stderr and restores the newest sound restore point', async () => {
    const url = await brokenCopy('restore');
    const target = join(directory, 'restored.db');
    const result = await runCli(['restore', url, target], { env: baseEnv() });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(
      /warning: .*LATEST.*; restored the newest restore point that passes restore's checks instead/,
    );
    expect(databaseHash(target)).toBe(expected.latest.contentHash);
  });

  it('replicate --restore-if-missing logs restore-fell-back and starts from that restore point', async () => {
    const url = await brokenCopy('first-boot');
    const database = join(directory, 'first-boot.db');
    const result = await runCli(
      [
        'replicate',
        database,
        url,
        '--restore-if-missing',
        '--log-format',
        'json',
        '--exec',
        `${JSON.stringify(process.execPath)} -e "process.exit(0)"`,
      ],
      { env: baseEnv(), timeoutMs: 60_000 },
    );
    expect(result.code, result.stderr).toBe(0);
    const events = result.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const fellBack = events.find((event) => event.event === 'backupd.restore_fell_back');
    expect(fellBack, result.stderr).toMatchObject({ database });
    expect(String(fellBack!.reason)).toContain('LATEST');
    expect(events.find((event) => event.event === 'backupd.restored')).toMatchObject({
      commitSeq: expected.latest.commitSeq,
    });
  }, 90_000);
});
