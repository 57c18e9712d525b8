import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
    expect(await restoreMissingDatabases(config, { env: {}, logger })).toEqual([]);
    expect(events()).toEqual([]);
  });

  it('restores a missing database from its first URL, and fails when there is nothing to restore', async () => {
    const path = join(scratch, 'missing.db');
    const config = singleDatabaseConfig(
      { path, url: `file://${join(scratch, 'empty-backups')}` },
      { env: {}, baseDir: scratch },
    );
    const { logger, events } = recordingLogger();
    await expect(restoreMissingDatabases(config, { env: {}, logger })).rejects.toThrow(
      /no restore point/,
    );
    expect(events()[0]).toMatchObject({ event: 'restore-if-missing', database: path });
  });
});
