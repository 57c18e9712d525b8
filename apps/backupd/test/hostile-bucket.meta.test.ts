/**
 * The hostile-bucket table's checks can fail: each broken operation below
 * does one thing the table forbids, and the table must reject it.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { latestKey } from '@x/manifest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTSIDE_KEY, PREFIX } from './hostile/bucket.ts';
import { hugeLatest, latestText } from './hostile/plant.ts';
import { HostileTable, passes, type Row, refuses } from './hostile/table.ts';

const FINE = passes('fine');
const row: Row = {
  name: 'meta',
  plant: latestText('garbage'),
  expect: {
    resume: refuses('LATEST does not name a manifest'),
    restore: FINE,
    ls: FINE,
    verify: FINE,
    lease: FINE,
    acquire: FINE,
  },
};

const table = new HostileTable();
beforeAll(() => table.setUp());
afterAll(() => table.tearDown());

describe('the hostile-bucket table rejects a broken operation that', () => {
  it('passes where it must refuse', async () => {
    await expect(
      table.run(row, 'resume', async () => ({ result: 'passed', text: 'backed up' })),
    ).rejects.toThrow(/expected it to refuse/);
  });

  it('refuses with the wrong words', async () => {
    await expect(
      table.run(row, 'resume', async () => ({ result: 'refused', text: 'something failed' })),
    ).rejects.toThrow(/expected it to refuse saying/);
  });

  it('prints a stack trace', async () => {
    const text = 'LATEST does not name a manifest\n    at resume (/src/backup-worker.ts:10:5)';
    await expect(
      table.run(row, 'resume', async () => ({ result: 'refused', text })),
    ).rejects.toThrow(/printed a stack trace/);
  });

  it('fails with a runtime error', async () => {
    await expect(
      table.run(row, 'resume', async () => ({
        result: 'refused',
        text: 'LATEST does not name a manifest',
        errorName: 'TypeError',
      })),
    ).rejects.toThrow(/runtime error/);
  });

  it('writes a file outside the prefix and the target', async () => {
    await expect(
      table.run(row, 'restore()', async (_store, paths) => {
        await writeFile(join(paths.restoreParent, 'etc', 'passwd'), 'pwned');
        return { result: 'passed', text: 'fine' };
      }),
    ).rejects.toThrow(/changed files it may not write/);
  });

  it('writes to the store while it should only read', async () => {
    await expect(
      table.run(row, 'backupd ls', async (store) => {
        await store.put(`${PREFIX}/manifest/junk`, new Uint8Array(1));
        return { result: 'passed', text: 'fine' };
      }),
    ).rejects.toThrow(/changed files it may not write|changed the store/);
  });

  it('deletes an object outside the prefix', async () => {
    await expect(
      table.run(
        { ...row, expect: { ...row.expect, retention: FINE } },
        'retention',
        async (store) => {
          await store.delete(OUTSIDE_KEY);
          return { result: 'passed', text: 'fine' };
        },
      ),
    ).rejects.toThrow(/changed files it may not write|outside the prefix/);
  });

  it('deletes an object that was planted', async () => {
    const created: Row = {
      ...row,
      plant: async (store) => {
        await store.put(`${PREFIX}/side/planted/00000000-00000000000000000001`, new Uint8Array(1));
      },
      expect: { ...row.expect, retention: FINE },
    };
    await expect(
      table.run(created, 'retention', async (store) => {
        await store.delete(`${PREFIX}/side/planted/00000000-00000000000000000001`);
        return { result: 'passed', text: 'fine' };
      }),
    ).rejects.toThrow(/planted or protected/);
  });

  it('reads a hostile object past its cap', async () => {
    const huge: Row = {
      ...row,
      plant: hugeLatest(100_000),
      readCap: { key: latestKey(PREFIX), bytes: 4096 },
      expect: { ...row.expect, resume: FINE },
    };
    await expect(
      table.run(huge, 'resume', async (store) => {
        await store.get(latestKey(PREFIX));
        return { result: 'passed', text: 'fine' };
      }),
    ).rejects.toThrow(/read more of backup\/LATEST than its cap/);
  });

  it('lets a rejection go unhandled', async () => {
    await expect(
      table.run(row, 'backupd ls', async () => {
        void Promise.reject(new Error('dropped on the floor'));
        return { result: 'passed', text: 'fine' };
      }),
    ).rejects.toThrow(/unhandled rejection/);
    table.unhandled.length = 0;
  });
});
