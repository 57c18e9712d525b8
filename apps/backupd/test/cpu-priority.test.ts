/**
 * backupd's CPU priority (@x/cpu-priority, whose own tests check each
 * priority against the kernel), read back from `/proc`: `backupd replicate`
 * at its default runs under SCHED_IDLE and logs it, while the application it
 * started with `--exec` keeps the priority it was started with.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEnv, startBackupd, waitFor } from './helpers/cli.ts';

const SCHED_IDLE = 5;

interface ThreadPriority {
  policy: number;
  nice: number;
}

/** Policy (field 41) and nice (field 19) of a `/proc/.../stat` line. */
function parseStat(stat: string): ThreadPriority {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { policy: Number(fields[41 - 3]), nice: Number(fields[19 - 3]) };
}

function threadsOf(pid: number | 'self'): ThreadPriority[] {
  return readdirSync(`/proc/${pid}/task`).map((id) =>
    parseStat(readFileSync(`/proc/${pid}/task/${id}/stat`, 'utf8')),
  );
}

describe.runIf(process.platform === 'linux')('backupd replicate at its default priority', () => {
  const directory = mkdtempSync(join(tmpdir(), 'backupd-priority-'));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('runs under SCHED_IDLE and logs it; the --exec application keeps its own priority', async () => {
    const database = join(directory, 'app.db');
    const db = new DatabaseSync(database);
    db.exec('PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER);');
    db.close();
    const report = join(directory, 'application-priority');
    const program = `require('node:fs').writeFileSync(${JSON.stringify(report)}, require('node:fs').readFileSync('/proc/self/stat', 'utf8')); setInterval(() => {}, 1000);`;
    const app = `${JSON.stringify(process.execPath)} -e "eval(Buffer.from('${Buffer.from(program).toString('base64')}', 'base64').toString())"`;
    const own = threadsOf('self')[0]!;
    const backupd = startBackupd(
      ['replicate', database, pathToFileURL(join(directory, 'backups')).href, '--exec', app],
      // The helpers' environment runs backupd at normal priority; this test wants the default.
      { env: baseEnv({ BACKUPD_CPU_PRIORITY: undefined, BACKUPD_INTERVAL: '200ms' }) },
    );
    try {
      await waitFor(
        'the priority to be logged',
        () => backupd.stderr.includes('"backupd.cpu_priority"'),
        {
          describe: () => backupd.describe(),
        },
      );
      const line = backupd.stderr
        .split('\n')
        .find((text) => text.includes('"backupd.cpu_priority"'))!;
      expect(JSON.parse(line)).toMatchObject({ event: 'backupd.cpu_priority', applied: 'idle' });
      const threads = threadsOf(backupd.child.pid!);
      expect(threads.length).toBeGreaterThan(1);
      for (const thread of threads) expect(thread.policy, backupd.describe()).toBe(SCHED_IDLE);
      await waitFor('the application to report', () => existsSync(report));
      await waitFor('the report to be written', () => readFileSync(report, 'utf8').includes(')'));
      expect(parseStat(readFileSync(report, 'utf8'))).toEqual(own);
    } finally {
      await backupd.stop('SIGTERM');
    }
  });
});
