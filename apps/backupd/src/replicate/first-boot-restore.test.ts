import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import { recordingLogger } from '../../test/helpers/recording-logger.ts';
import { singleDatabaseConfig } from '../config.ts';
import { restoreMissingDatabases } from './first-boot-restore.ts';

const scratch = mkdtempSync(join(tmpdir(), 'backupd-first-boot-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('restoreMissingDatabases', () => {
  it('leaves a database that exists alone, without opening its store', async () => {
    const path = join(scratch, 'present.db');
    writeFileSync(path, 'the application database');
    // An unreachable store: opening it would fail.
    const config = singleDatabaseConfig(
      { path, url: 's3://bucket/app?endpoint=http://127.0.0.1:1' },
      { env: {}, baseDir: scratch },
    );
    const { logger, events } = recordingLogger();
    expect(await restoreMissingDatabases(config, { env: {}, logger })).toEqual({
      restored: [],
      fresh: [],
    });
    expect(events()).toEqual([]);
  });

  it('starts a missing database fresh when nothing was backed up at its first URL', async () => {
    const path = join(scratch, 'missing.db');
    const url = `file://${join(scratch, 'empty-backups')}`;
    const config = singleDatabaseConfig({ path, url }, { env: {}, baseDir: scratch });
    const { logger, events } = recordingLogger();
    expect(await restoreMissingDatabases(config, { env: {}, logger })).toEqual({
      restored: [],
      fresh: [path],
    });
    expect(events()[0]).toMatchObject({ event: 'backupd.restore_if_missing', database: path });
    expect(events()[1]).toMatchObject({
      event: 'backupd.starting_fresh',
      note: `restore-if-missing: nothing backed up at ${url} yet; starting fresh`,
    });
    expect(existsSync(path)).toBe(false);
  });

  it('fails when the prefix holds data but no LATEST: a broken backup is not started over', async () => {
    const path = join(scratch, 'broken.db');
    const root = join(scratch, 'broken-backups');
    await new FsStore({ root }).put(
      'backup/manifest/00000000000000000001.json',
      new TextEncoder().encode('{}'),
    );
    const config = singleDatabaseConfig(
      { path, url: `file://${root}` },
      { env: {}, baseDir: scratch },
    );
    const { logger } = recordingLogger();
    // Restore looked for a restore point to fall back to and found none usable.
    await expect(restoreMissingDatabases(config, { env: {}, logger })).rejects.toThrow(
      /LATEST does not exist; and none of the 1 other manifest\(s\) passes restore's checks/,
    );
    expect(existsSync(path)).toBe(false);
  });
});
