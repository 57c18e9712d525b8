/**
 * A refusal no retry can clear ends `replicate` with exit code 5 (after
 * saying why), so systemd, an orchestrator or a script sees the failure;
 * with `--exec` it stays up, unhealthy, for as long as the application runs.
 * The refusal here is the lineage: a second database pointed at a prefix
 * that already holds another database's backup.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, runCli, startBackupd, waitFor } from './helpers/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'backupd-permanent-refusal-'));
const backups = pathToFileURL(join(directory, 'backups')).href;
const env = baseEnv();

function walDatabase(name: string): string {
  const path = join(directory, name);
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);');
  db.close();
  return path;
}

beforeAll(async () => {
  // The first database's backup: one restore point, then a clean stop.
  const first = startBackupd(
    ['replicate', walDatabase('first.db'), backups, '--log-format', 'json'],
    {
      env,
    },
  );
  await waitFor(
    'the first restore point',
    async () => {
      const listed = await runCli(['ls', backups, '--json'], { env });
      return listed.code === 0 && (JSON.parse(listed.stdout) as unknown[]).length > 0;
    },
    { describe: () => first.describe() },
  );
  expect((await first.stop('SIGTERM', 60_000)).code, first.describe()).toBe(0);
}, 120_000);
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('a refusal no retry can clear', () => {
  it('ends replicate with exit code 5, naming the database, the kind and the reason', async () => {
    const second = startBackupd(
      ['replicate', walDatabase('second.db'), backups, '--log-format', 'json'],
      { env },
    );
    const exited = await Promise.race([
      second.exited,
      new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 60_000)),
    ]);
    if (exited === 'timeout') await second.stop('SIGKILL', 10_000);
    expect(exited, second.describe()).toMatchObject({ code: 5 });
    const refused = second.logEvents().find((event) => event.event === 'backupd.replica_refused');
    expect(refused, second.describe()).toMatchObject({
      kind: 'lineage',
      database: join(directory, 'second.db'),
    });
    expect(String(refused!.reason)).toContain('another');
  }, 90_000);

  it('with --exec stays up, unhealthy, while the application runs, and exits with its code', async () => {
    const second = startBackupd(
      [
        'replicate',
        walDatabase('third.db'),
        backups,
        '--log-format',
        'json',
        '--exec',
        `${JSON.stringify(process.execPath)} -e "setTimeout(() => process.exit(7), 4000)"`,
      ],
      { env },
    );
    const { code } = await second.exited;
    expect(code, second.describe()).toBe(7);
    expect(
      second.logEvents().some((event) => event.event === 'backupd.replica_refused'),
      second.describe(),
    ).toBe(true);
  }, 90_000);
});
