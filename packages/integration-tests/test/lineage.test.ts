/**
 * Lineage: every refusal (uploads nothing, deletes nothing, unhealthy with the
 * reason), and the adoption rule for a store restored from the prefix.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupError, BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import { archiveKey } from '@x/manifest';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore, type ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket, checkRestorePointContent } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { realStoreCases } from './helpers/real-stores.ts';
import { CountingStore, localStoreCases } from './helpers/stores.ts';

let prefix = '';

function workerFor(store: ObjectStore, engine: FramedTestEngine, retain = 24): BackupWorker {
  return new BackupWorker({
    store,
    prefix,
    source: new FramedDirSource({ directory: engine.directory, engine }),
    clock: new FakeClock(),
    manifestIntervalMs: 0,
    retain,
  });
}

async function lineageOf(engine: FramedTestEngine): Promise<string> {
  return (await readFile(engine.path('backup.lineage'), 'utf8')).trim();
}

async function snapshotOfBucket(store: ObjectStore): Promise<Map<string, string>> {
  const listed = await store.list(`${prefix}/`);
  const map = new Map<string, string>();
  for (const o of listed.objects) map.set(o.key, JSON.stringify(o.version));
  return map;
}

for (const storeCase of [...localStoreCases(), ...realStoreCases()]) {
  describe(`lineage (${storeCase.name})`, () => {
    let root: string;
    let store: ObjectStore;
    let close: () => Promise<void>;
    let original: FramedTestEngine;

    beforeEach(async () => {
      root = await mkdtemp(join(tmpdir(), 'backup-worker-lineage-'));
      ({ store, prefix, close } = await storeCase.open());
      original = await FramedTestEngine.create(join(root, 'original'));
      await original.commit(2);
      await original.snapshot();
      await original.commit(3);
      await workerFor(store, original).runOnce();
    });
    afterEach(async () => {
      await rm(root, { recursive: true, force: true });
      await close();
    });

    /** What the package's `restore()` makes of the manifest: a restored store with a parent record and no lineage. */
    async function restoreFrom(manifestKey: string, name: string): Promise<FramedTestEngine> {
      const directory = join(root, name);
      await restoreFramedStore(store, prefix, directory, {
        target: { kind: 'restore-point', manifestKey },
      });
      await expect(readFile(join(directory, 'backup.lineage'))).rejects.toThrow();
      return original.restoredInto(directory);
    }

    async function expectRefused(engine: FramedTestEngine, reason: RegExp): Promise<void> {
      const before = await snapshotOfBucket(store);
      const counting = new CountingStore(store);
      const worker = workerFor(counting, engine);
      const error = await worker.runOnce().catch((e: unknown) => e);
      expect(BackupError.hasCode(error, 'LINEAGE_REFUSED')).toBe(true);
      expect((error as BackupError).reason).toMatch(reason);
      // Refused for good: a second step refuses again without a request.
      const requests = { ...counting.counts };
      await expect(worker.runOnce()).rejects.toThrow(reason);
      expect(counting.counts).toEqual(requests);
      // Nothing uploaded, nothing deleted.
      expect(counting.writes).toEqual([]);
      expect(await snapshotOfBucket(store)).toEqual(before);
      // Unhealthy with the reason.
      await worker.step();
      const health = worker.health();
      expect(health.healthy).toBe(false);
      expect(health.reason).toMatch(reason);
    }

    it('refuses a prefix whose newest restore point is another lineage', async () => {
      const other = await FramedTestEngine.create(join(root, 'other'));
      await other.commit(9);
      await workerFor(new MemoryStore(), other).runOnce(); // gives it a lineage elsewhere
      const theirs = await lineageOf(original);
      const ours = await lineageOf(other);
      await expectRefused(
        other,
        new RegExp(
          `^this backup prefix holds the backups of another store \\(lineage ${theirs}\\), not this one \\(lineage ${ours}\\); nothing is uploaded or deleted`,
        ),
      );
    });

    it('refuses when this store has no lineage but the prefix has restore points', async () => {
      const fresh = await FramedTestEngine.create(join(root, 'fresh'));
      await fresh.commit(9);
      const theirs = await lineageOf(original);
      await expectRefused(
        fresh,
        new RegExp(
          `^this backup prefix holds the backups of another store \\(lineage ${theirs}\\), and this store has never been backed up; nothing is uploaded or deleted`,
        ),
      );
    });

    it('refuses a store that holds fewer commits than the newest restore point (rewound)', async () => {
      const rewound = await original.clone(join(root, 'rewound'));
      await original.commit(4);
      await workerFor(store, original).runOnce(); // the prefix moves to 9 commits
      await expectRefused(
        rewound,
        /^this store holds 5 commits, fewer than the 9 of the newest restore point in the backup prefix: it was restored from an older backup, or rewound\. Uploading would bury the newer history, so nothing is uploaded or deleted/,
      );
    });

    it('refuses a restored store once the prefix has moved on since its restore', async () => {
      const { latest, manifests } = await checkBucket(store, prefix);
      const parent = {
        lineage: await lineageOf(original),
        manifestKey: latest!,
        commitSeq: manifests.get(latest!)!.commitSeq,
      };
      const restored = await restoreFrom(parent.manifestKey, 'restored');
      expect(await readFile(restored.path('backup.parent'), 'utf8').then(JSON.parse)).toEqual(
        parent,
      );
      await original.commit(1);
      await workerFor(store, original).runOnce();
      const moved = (await checkBucket(store, prefix)).latest!;
      await expectRefused(
        restored,
        new RegExp(
          `^this store was restored from ${parent.manifestKey} of lineage ${parent.lineage}, but the backup prefix has moved on since \\(LATEST names ${moved}\\): another instance has written to it\\. Nothing is uploaded or deleted`,
        ),
      );
    });

    it('adopts the prefix while LATEST names exactly the manifest it was restored from', async () => {
      const { latest, manifests } = await checkBucket(store, prefix);
      const parentManifest = manifests.get(latest!)!;
      const parentLineage = await lineageOf(original);
      const parent = {
        lineage: parentLineage,
        manifestKey: latest!,
        commitSeq: parentManifest.commitSeq,
      };
      const restored = await restoreFrom(parent.manifestKey, 'restored');
      const parentObjects = await snapshotOfBucket(store);

      const worker = workerFor(store, restored, 1);
      // Same commit count: the parent's manifest key is not written again.
      await worker.runOnce();
      const ownLineage = await lineageOf(restored);
      expect(ownLineage).not.toBe(parentLineage);
      let check = await checkBucket(store, prefix, { content: true });
      expect(check.latest).toBe(latest);
      expect((await store.get(latest!))!.version).toEqual(JSON.parse(parentObjects.get(latest!)!));

      // One commit later: the new lineage's first restore point, LATEST moves.
      await restored.commit(1);
      await worker.runOnce();
      check = await checkBucket(store, prefix, { content: true });
      const own = check.manifests.get(check.latest!)!;
      expect(own.lineage).toBe(ownLineage);
      expect(own.commitSeq).toBe(parentManifest.commitSeq + 1);
      // Its generation numbers are past every one in the prefix.
      expect(own.walGeneration).toBeGreaterThan(parentManifest.walGeneration);
      for (const entry of [...own.files, ...own.segments]) expect(entry.lineage).toBe(ownLineage);
      await checkRestorePointContent(store, prefix, own);

      // More restore points, with retention at 1: nothing of the parent's is
      // overwritten or deleted.
      for (let i = 0; i < 3; i += 1) {
        await restored.commit(1);
        await worker.runOnce();
      }
      await restored.snapshot();
      await restored.commit(1);
      await worker.runOnce();
      const after = await snapshotOfBucket(store);
      for (const [key, version] of parentObjects) {
        if (key === `${prefix}/LATEST`) continue;
        expect(after.get(key), key).toBe(version);
      }
      check = await checkBucket(store, prefix, { content: true });
      const ours = [...check.manifests.values()].filter((m) => m.lineage === ownLineage);
      expect(ours).toHaveLength(1);
      expect(check.manifests.get(latest!)!.lineage).toBe(parentLineage);
    });

    it('reuses an archive from the bucket only when number, length and CRC match', async () => {
      // A new worker (a restart) seeds the archives LATEST names; the local
      // wal.1.archive matches by number, length and CRC: not uploaded again.
      await original.snapshot();
      await original.commit(1);
      const counting = new CountingStore(store);
      await workerFor(counting, original).runOnce();
      expect(counting.writes.filter((w) => w.includes('/archives/'))).toEqual([
        `UPLOAD ${archiveKey(prefix, 1, 2)}`,
      ]);

      // Same number and length, other bytes: uploaded anew under the new generation.
      const copy = await original.clone(join(root, 'copy'));
      const path = copy.path('wal.1.archive');
      const bytes = await readFile(path);
      bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0x01;
      await writeFile(path, bytes);
      const counting2 = new CountingStore(store);
      await workerFor(counting2, copy).runOnce();
      expect(counting2.writes.filter((w) => w.includes('/archives/'))).toEqual([
        `UPLOAD ${archiveKey(prefix, 2, 1)}`,
      ]);
    });
  });
}
