/**
 * A restore of the latest state when LATEST is unusable: it falls back to
 * the newest restore point that passes restore's checks and says so; a
 * named manifest never falls back; when nothing is usable the refusal names
 * both LATEST's problem and the manifests'.
 */
import { join } from 'node:path';
import { latestKey, MAX_LATEST_BYTES, manifestKey } from '@x/manifest';
import { NoRestorePointError, RestorePointRejectedError } from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Fixture, readFiles, writeFixture } from './restore/fixture.ts';
import { localStores, scratchDirectory } from './restore/stores.ts';

const PREFIX = 'backups/db1';
const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

async function overwrite(store: ObjectStore, key: string, bytes: Uint8Array): Promise<void> {
  await store.put(key, bytes, { mode: 'overwrite' });
}

for (const storeCase of localStores) {
  describe(`restore with an unusable LATEST on ${storeCase.name}`, () => {
    let store: ObjectStore;
    let cleanupStore: () => Promise<void>;
    let scratch: { path: string; cleanup(): Promise<void> };
    let fixture: Fixture;

    beforeEach(async () => {
      ({ store, cleanup: cleanupStore } = await storeCase.create());
      scratch = await scratchDirectory();
      fixture = await writeFixture(store, PREFIX);
    });
    afterEach(async () => {
      await scratch.cleanup();
      await cleanupStore();
    });

    const newest = (): Fixture['manifests'][number] => fixture.manifests.at(-1)!;

    async function expectRestoredFrom(
      target: string,
      entry: Fixture['manifests'][number],
    ): Promise<void> {
      const files = await readFiles(target);
      files.delete('backup.parent');
      const expected = fixture.expectedFiles(entry.manifest.commitSeq);
      expect([...files.keys()].sort()).toEqual([...expected.keys()].sort());
      for (const [name, bytes] of expected)
        expect(Buffer.from(files.get(name)!).equals(Buffer.from(bytes)), name).toBe(true);
    }

    const unreadable: { what: string; bytes: () => Uint8Array; reason: string }[] = [
      {
        what: 'truncated',
        bytes: () => encode(newest().key.slice(0, newest().key.length - 7)),
        reason: 'does not hold one manifest key',
      },
      {
        what: 'garbage',
        bytes: () => new Uint8Array([0xff, 0xfe, 0x00, 0x13, 0x37, 0x80]),
        reason: 'LATEST',
      },
      {
        what: 'too large',
        bytes: () => new Uint8Array(MAX_LATEST_BYTES + 1).fill(0x61),
        reason: `larger than ${MAX_LATEST_BYTES} bytes`,
      },
    ];
    for (const { what, bytes, reason } of unreadable) {
      it(`a ${what} LATEST: restores the newest restore point and says so`, async () => {
        await overwrite(store, latestKey(PREFIX), bytes());
        const target = join(scratch.path, 'restored');
        const result = await restoreFramedStore(store, PREFIX, target);
        expect(result.manifestKey).toBe(newest().key);
        expect(result.commitSeq).toBe(newest().manifest.commitSeq);
        expect(result.fellBackFrom?.latest).toBeNull();
        expect(result.fellBackFrom?.reason).toContain(reason);
        await expectRestoredFrom(target, newest());
      });
    }

    it('LATEST naming a missing manifest: restores the newest that exists and says which LATEST named', async () => {
      const missing = manifestKey(PREFIX, 30);
      await overwrite(store, latestKey(PREFIX), encode(missing));
      const result = await restoreFramedStore(store, PREFIX, join(scratch.path, 'restored'));
      expect(result.manifestKey).toBe(newest().key);
      expect(result.fellBackFrom).toEqual({
        latest: missing,
        reason: `LATEST names ${missing}, which does not exist`,
      });
    });

    it('LATEST naming a manifest that does not parse: restores the one before it', async () => {
      await overwrite(store, newest().key, encode('{"format": "truncat'));
      const previous = fixture.manifests.at(-2)!;
      const target = join(scratch.path, 'restored');
      const result = await restoreFramedStore(store, PREFIX, target);
      expect(result.manifestKey).toBe(previous.key);
      expect(result.commitSeq).toBe(previous.manifest.commitSeq);
      expect(result.fellBackFrom?.latest).toBe(newest().key);
      expect(result.fellBackFrom?.reason).toContain('does not parse');
      expect(result.parent.manifestKey).toBe(previous.key);
      await expectRestoredFrom(target, previous);
    });

    it('a readable LATEST is used as it is: no fellBackFrom', async () => {
      const result = await restoreFramedStore(store, PREFIX, join(scratch.path, 'restored'));
      expect(result.manifestKey).toBe(newest().key);
      expect(result).not.toHaveProperty('fellBackFrom');
    });

    it('a named manifest never falls back', async () => {
      await overwrite(store, newest().key, encode('not json'));
      const error = await restoreFramedStore(store, PREFIX, join(scratch.path, 'restored'), {
        target: { kind: 'restore-point', manifestKey: newest().key },
      }).catch((e: unknown) => e);
      expect(RestorePointRejectedError.isInstance(error), String(error)).toBe(true);
      expect((error as RestorePointRejectedError).key).toBe(newest().key);
    });

    it('nothing usable: a RestorePointRejectedError naming LATEST and every manifest', async () => {
      await overwrite(store, latestKey(PREFIX), encode('garbage'));
      for (const entry of fixture.manifests) await overwrite(store, entry.key, encode('{'));
      const error = await restoreFramedStore(store, PREFIX, join(scratch.path, 'restored')).catch(
        (e: unknown) => e,
      );
      expect(RestorePointRejectedError.isInstance(error), String(error)).toBe(true);
      const refusal = error as RestorePointRejectedError;
      expect(refusal.key).toBe(latestKey(PREFIX));
      expect(refusal.problems[0]).toContain('does not hold one manifest key');
      expect(refusal.problems[1]).toContain(
        `none of the ${fixture.manifests.length} other manifest(s) passes restore's checks`,
      );
      for (const entry of fixture.manifests) expect(refusal.message).toContain(entry.key);
    });

    it('an empty prefix is still NoRestorePointError', async () => {
      const error = await restoreFramedStore(
        store,
        'backups/nothing',
        join(scratch.path, 'restored'),
      ).catch((e: unknown) => e);
      expect(NoRestorePointError.isInstance(error)).toBe(true);
    });
  });
}
