/**
 * `BACKUPD_DATABASE_LOCK`: `off` runs replicate without the local lock (a
 * second replicate of the same database is then not refused; the bucket
 * lease alone keeps them apart, as the soak exercises), and any value but
 * `on` or `off` is a usage error before anything starts.
 */
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  baseEnv,
  createWalDatabase,
  runCli,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';

describe('BACKUPD_DATABASE_LOCK', () => {
  const { directory, running } = suiteWorkspace('database-lock-setting');

  it('refuses a value other than on or off, naming it, before anything starts', async () => {
    const database = join(directory, 'refused.db');
    await createWalDatabase(database);
    const result = await runCli(['replicate', database], {
      env: baseEnv({ BACKUPD_DATABASE_LOCK: 'maybe' }),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('BACKUPD_DATABASE_LOCK must be "on" or "off", got "maybe"');
    expect(existsSync(join(directory, `.${basename(database)}-backupd`, 'lock'))).toBe(false);
  });

  it('off: two replicates of one database both start, and nothing is written beside it', async () => {
    const database = join(directory, 'unlocked.db');
    await createWalDatabase(database);
    const env = baseEnv({ BACKUPD_DATABASE_LOCK: 'off', BACKUPD_LEASE_TTL: '3s' });
    const first = startBackupd(
      ['replicate', database, pathToFileURL(join(directory, 'one')).href],
      { env, label: 'first' },
    );
    running.push(first);
    const second = startBackupd(
      ['replicate', database, pathToFileURL(join(directory, 'two')).href],
      { env, label: 'second' },
    );
    running.push(second);
    for (const replicate of [first, second])
      await waitFor(
        'each replicate to warn that the lock is off and to take its lease',
        () => {
          const events = replicate.logEvents().map((line) => line.event);
          return events.includes('backupd.database_lock_off') && events.includes('lease.acquired');
        },
        { describe: () => replicate.describe() },
      );
    expect(existsSync(join(directory, `.${basename(database)}-backupd`, 'lock'))).toBe(false);
    expect(existsSync(join(directory, `.${basename(database)}-backupd`, 'holder.json'))).toBe(
      false,
    );
    expect(await first.stop('SIGTERM'), first.describe()).toEqual({ code: 0, signal: null });
    expect(await second.stop('SIGTERM'), second.describe()).toEqual({ code: 0, signal: null });
  });
});
