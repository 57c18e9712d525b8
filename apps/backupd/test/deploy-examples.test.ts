/**
 * The deployment examples in deploy/ work as written:
 * - deploy/systemd/backupd.service passes `systemd-analyze verify` without a
 *   single complaint about it, restarts on failure but not on exit codes 2
 *   and 5, and gives backupd longer than its shutdown grace to stop;
 * - deploy/container/entrypoint.sh, run as a plain process (no container):
 *   a first boot at an empty URL starts the application, backs up the
 *   database it created and exits with its code; a second boot in a fresh
 *   directory restores before the application starts (the application sees
 *   the first boot's rows), and SIGTERM to the entrypoint's process reaches
 *   backupd, which forwards it to the application and stops gracefully.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DEFAULT_SHUTDOWN_GRACE_MS } from '@x/backup-worker';
import { describe, expect, it } from 'vitest';
import { EXIT_PERMANENT_REFUSAL, EXIT_USAGE } from '../src/exit-codes.ts';
import {
  BACKUPD_BIN,
  baseEnv,
  RunningProcess,
  runCli,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';

const REPOSITORY = fileURLToPath(new URL('../../../', import.meta.url));
const UNIT = join(REPOSITORY, 'deploy/systemd/backupd.service');
const ENTRYPOINT = join(REPOSITORY, 'deploy/container/entrypoint.sh');
const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
/** The binary the unit's ExecStart names; the test points it at a stand-in. */
const UNIT_BINARY = '/usr/local/bin/backupd';
const inCi = process.env.CI === 'true';
const haveSystemdAnalyze = existsSync(SYSTEMD_ANALYZE);

/** The values of `key` in the unit's [Service] section, in order. */
function serviceValues(unit: string, key: string): string[] {
  const values: string[] = [];
  let section = '';
  for (const raw of unit.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) section = line;
    else if (section === '[Service]' && line.startsWith(`${key}=`))
      values.push(line.slice(key.length + 1));
  }
  return values;
}

function verify(unitText: string, directory: string): { status: number | null; output: string } {
  // The unit must keep its name: systemd-analyze names it in every complaint.
  const path = join(directory, 'backupd.service');
  writeFileSync(path, unitText);
  const result = spawnSync(SYSTEMD_ANALYZE, ['verify', path], { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** Complaints about the unit itself (others, about the host's own units, are not its doing). */
function complaints(output: string): string[] {
  return output.split('\n').filter((line) => line.includes('backupd.service'));
}

describe('deploy/systemd/backupd.service', () => {
  const { directory } = suiteWorkspace('deploy-systemd');
  const unit = readFileSync(UNIT, 'utf8');

  it.skipIf(!haveSystemdAnalyze && !inCi)('passes systemd-analyze verify', () => {
    if (!haveSystemdAnalyze) throw new Error(`${SYSTEMD_ANALYZE} is missing under CI=true`);
    // verify checks that ExecStart's binary exists and is executable: a
    // stand-in at a path of the test's own, named in a copy of the unit.
    expect(serviceValues(unit, 'ExecStart')).toEqual([
      `${UNIT_BINARY} replicate -c /etc/backupd/backupd.yml`,
    ]);
    const standIn = join(directory, 'backupd');
    writeFileSync(standIn, '#!/bin/sh\nexit 0\n');
    chmodSync(standIn, 0o755);
    const copy = unit.replace(`ExecStart=${UNIT_BINARY} `, `ExecStart=${standIn} `);
    const good = join(directory, 'good');
    mkdirSync(good);
    const result = verify(copy, good);
    expect(complaints(result.output), result.output).toEqual([]);
    expect(result.status, result.output).toBe(0);

    // The check above can fail: verify accepts a misspelt directive with
    // exit 0 but names it, and the filter sees that line.
    const broken = join(directory, 'broken');
    mkdirSync(broken);
    const misspelt = verify(copy.replace('KillSignal=', 'KillSignall='), broken);
    expect(complaints(misspelt.output).join('\n')).toContain("Unknown key 'KillSignall'");
  });

  it('does not restart on exit codes 2 and 5, and restarts on failure otherwise', () => {
    expect(serviceValues(unit, 'Restart')).toEqual(['on-failure']);
    const prevented = serviceValues(unit, 'RestartPreventExitStatus').flatMap((value) =>
      value.split(/\s+/),
    );
    expect(prevented).toContain(String(EXIT_USAGE));
    expect(prevented).toContain(String(EXIT_PERMANENT_REFUSAL));
  });

  it.skipIf(!haveSystemdAnalyze && !inCi)(
    'stops with one SIGTERM to backupd and waits longer than the default shutdown grace',
    () => {
      expect(serviceValues(unit, 'KillSignal')).toEqual(['SIGTERM']);
      expect(serviceValues(unit, 'KillMode')).toEqual(['mixed']);
      const [timeout] = serviceValues(unit, 'TimeoutStopSec');
      expect(timeout).toBeDefined();
      const parsed = spawnSync(SYSTEMD_ANALYZE, ['timespan', timeout ?? ''], { encoding: 'utf8' });
      const microseconds = /μs:\s*(\d+)/.exec(parsed.stdout)?.[1];
      expect(microseconds, parsed.stdout + parsed.stderr).toBeDefined();
      expect(Number(microseconds) / 1000).toBeGreaterThan(DEFAULT_SHUTDOWN_GRACE_MS);
    },
  );

  it('runs as a dedicated user with a read-only system', () => {
    expect(serviceValues(unit, 'User')).toEqual(['backupd']);
    expect(serviceValues(unit, 'ProtectSystem')).toEqual(['strict']);
    expect(serviceValues(unit, 'ReadWritePaths').length).toBeGreaterThan(0);
    expect(serviceValues(unit, 'NoNewPrivileges')).toEqual(['true']);
    expect(serviceValues(unit, 'PrivateTmp')).toEqual(['true']);
  });
});

/**
 * The application the entrypoint starts: opens (or creates) the database in
 * WAL mode, notes how many rows it found, adds 30, and reports what it saw in
 * a JSON file. `exit <file>`: exits 0 once `<file>` exists. `serve`: runs
 * until SIGTERM, then exits 7.
 *
 * Why `exit` waits for a file (the replica's LATEST): an application that
 * exits before backupd has taken the lease stops backupd before it shipped
 * anything, and that stop exits 0 with nothing backed up, so the test waits
 * for the first restore point instead of racing it.
 */
const APPLICATION = `import { existsSync, writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
const [database, report, mode, awaited] = process.argv.slice(2);
const db = new DatabaseSync(database);
db.exec('PRAGMA journal_mode=WAL; PRAGMA busy_timeout=5000; CREATE TABLE IF NOT EXISTS t (x INTEGER)');
const seen = db.prepare('SELECT count(*) AS n FROM t').get().n;
for (let i = 0; i < 30; i++) db.prepare('INSERT INTO t VALUES (?)').run(i);
db.close();
writeFileSync(report, JSON.stringify({ seen }));
if (mode === 'exit') {
  const poll = setInterval(() => {
    if (existsSync(awaited)) {
      clearInterval(poll);
      process.exit(0);
    }
  }, 50);
} else {
  setInterval(() => {}, 1 << 30);
  process.on('SIGTERM', () => {
    writeFileSync(report, JSON.stringify({ seen, terminated: true }));
    process.exit(7);
  });
}
`;

function rowCount(database: string): number {
  const db = new DatabaseSync(database, { readOnly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('deploy/container/entrypoint.sh as a plain process', () => {
  const { directory, running } = suiteWorkspace('deploy-entrypoint');
  const application = join(directory, 'app.mjs');
  writeFileSync(application, APPLICATION);
  const replica = join(directory, 'replica');
  const url = pathToFileURL(replica).href;
  // A directory name with a space and a quote: the application's arguments
  // must reach it unchanged through --exec.
  const reports = join(directory, "it's reports");
  mkdirSync(reports);

  function entrypoint(label: string, data: string, args: readonly string[], extra = {}) {
    const started = new RunningProcess(label, 'sh', [ENTRYPOINT, ...args], {
      env: baseEnv({
        BACKUPD_INTERVAL: '200ms',
        BACKUPD_LEASE_TTL: '3s',
        BACKUPD_RESTORE_POINT_INTERVAL: '200ms',
        BACKUPD_BIN: `${process.execPath} ${BACKUPD_BIN}`,
        BACKUPD_DATABASE: join(data, 'app.db'),
        BACKUPD_URL: url,
        ...extra,
      }),
    });
    running.push(started);
    return started;
  }

  it('first boot at an empty URL: starts the application, backs up what it created, exits with its code', async () => {
    const data = join(directory, 'first', 'data');
    const report = join(reports, 'first.json');
    const boot = entrypoint('first boot', data, [
      process.execPath,
      application,
      join(data, 'app.db'),
      report,
      'exit',
      // FsStore's file for the key LATEST.
      join(replica, 'backup', 'LATEST~obj'),
    ]);
    const exited = await boot.exited;
    expect(exited.code, boot.describe()).toBe(0);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toEqual({ seen: 0 });
    expect(boot.stdout).toContain(`nothing was backed up at ${url} yet; nothing restored`);

    const restored = join(directory, 'check-first.db');
    const restore = await runCli(['restore', url, restored], { env: baseEnv() });
    expect(restore.code, restore.stderr).toBe(0);
    expect(rowCount(restored)).toBe(30);
  });

  it('second boot in a fresh directory: restores before the application starts; SIGTERM reaches the application through backupd', async () => {
    const data = join(directory, 'second', 'data');
    const report = join(reports, 'second.json');
    const boot = entrypoint('second boot', data, [
      process.execPath,
      application,
      join(data, 'app.db'),
      report,
      'serve',
    ]);
    const seen = await waitFor(
      'the application to report',
      () => existsSync(report) && (JSON.parse(readFileSync(report, 'utf8')) as { seen: number }),
      { timeoutMs: 60_000, describe: () => boot.describe() },
    );
    expect(seen).toEqual({ seen: 30 });
    // The entrypoint's own restore step did it (replicate's would log JSON).
    expect(boot.stdout).toContain('restored commit');
    // Signalled once backupd ships (see APPLICATION), so the stop has
    // something to make restorable.
    await waitFor(
      'backupd to take the lease',
      () => boot.logEvents().some((line) => line.event === 'backup.lease_taken'),
      { timeoutMs: 60_000, describe: () => boot.describe() },
    );
    // The entrypoint's own process: backupd after the exec.
    const exited = await boot.stop('SIGTERM', 60_000);
    expect(exited, boot.describe()).toEqual({ code: 7, signal: null });
    expect(JSON.parse(readFileSync(report, 'utf8'))).toEqual({ seen: 30, terminated: true });

    const restored = join(directory, 'check-second.db');
    const restore = await runCli(['restore', url, restored], { env: baseEnv() });
    expect(restore.code, restore.stderr).toBe(0);
    expect(rowCount(restored)).toBe(60);
  });

  it('refuses to start without its settings or an application command (exit 2, naming what is missing)', async () => {
    const data = join(directory, 'unset');
    const noUrl = entrypoint('no url', data, ['true'], { BACKUPD_URL: undefined });
    expect((await noUrl.exited).code).toBe(2);
    expect(noUrl.stderr).toContain('BACKUPD_URL is not set');
    const noCommand = entrypoint('no command', data, []);
    expect((await noCommand.exited).code).toBe(2);
    expect(noCommand.stderr).toContain('no application command given');
    expect(existsSync(join(data, 'app.db'))).toBe(false);
  });
});
