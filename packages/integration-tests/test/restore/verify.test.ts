import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  crc32Hex,
  latestKey,
  MAX_MANIFEST_BYTES,
  manifestKey,
  serializeManifest,
} from '@x/manifest';
import {
  listRestorePoints,
  MAX_LATEST_FOLLOWS,
  RestorePointRejectedError,
  type VerifyProgress,
  verify,
} from '@x/restore';
import { restoreFramedStore } from '@x/source-framed';
import type { ObjectStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Fixture, writeFixture } from './fixture.ts';
import { localStores } from './stores.ts';

const PREFIX = 'backups/db1';
const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

/** `store`, with `beforeRead(key)` run (a live writer's work) before each streamed read. */
function racing(store: ObjectStore, beforeRead: (key: string) => Promise<void>): ObjectStore {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'getStream')
        return async (...args: Parameters<ObjectStore['getStream']>) => {
          await beforeRead(args[0]);
          return target.getStream(...args);
        };
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * LATEST names the restore point before the newest, and the newest is in
 * the store only when `newestListed`; right before a reader of the store
 * returned reads LATEST's target, a writer publishes the newest restore
 * point, moves LATEST to it and retires the one before.
 */
async function stageLatestRace(
  store: ObjectStore,
  fixture: Fixture,
  newestListed: boolean,
): Promise<{ live: ObjectStore; raced: () => boolean; newest: string; before: string }> {
  const newest = fixture.manifests.at(-1)!;
  const before = fixture.manifests.at(-2)!;
  const newestBytes = encode(serializeManifest(newest.manifest));
  if (newestListed) await store.put(newest.key, newestBytes, { mode: 'overwrite' });
  else await store.delete(newest.key);
  await store.put(before.key, encode(serializeManifest(before.manifest)), { mode: 'overwrite' });
  await store.put(latestKey(PREFIX), encode(before.key), { mode: 'overwrite' });
  let raced = false;
  const live = racing(store, async (key) => {
    if (key !== before.key || raced) return;
    raced = true;
    await store.put(newest.key, newestBytes, { mode: 'overwrite' });
    await store.put(latestKey(PREFIX), encode(newest.key), { mode: 'overwrite' });
    await store.delete(before.key);
  });
  return { live, raced: () => raced, newest: newest.key, before: before.key };
}

for (const storeCase of localStores) {
  describe(`verify on ${storeCase.name}`, () => {
    let store: ObjectStore;
    let cleanup: () => Promise<void>;
    let fixture: Fixture;

    beforeEach(async () => {
      ({ store, cleanup } = await storeCase.create());
      fixture = await writeFixture(store, PREFIX);
    });
    afterEach(async () => {
      await cleanup();
    });

    const kindsOf = async (deep: boolean) => {
      const report = await verify(store, PREFIX, { deep });
      return {
        report,
        latest: report.latest.problems.map((problem) => problem.kind),
        byManifest: Object.fromEntries(
          report.manifests.map((manifest) => [
            manifest.key,
            manifest.problems.map((problem) => problem.kind),
          ]),
        ),
      };
    };

    it('a sound prefix verifies, shallow and deep, each object checked once', async () => {
      for (const deep of [false, true]) {
        const report = await verify(store, PREFIX, { deep });
        expect(report.ok).toBe(true);
        expect(report.latest).toEqual({ manifestKey: fixture.latestKey, ok: true, problems: [] });
        expect(report.manifests.map((manifest) => [manifest.key, manifest.status])).toEqual(
          fixture.manifests.map((entry) => [entry.key, 'ok']),
        );
        const distinct = new Set(
          fixture.manifests.flatMap((entry) => [
            ...entry.manifest.files.map((file) => file.key),
            ...entry.manifest.segments.map((segment) => segment.key),
          ]),
        );
        expect(report.objectsChecked).toBe(distinct.size);
        let bytes = 0;
        for (const key of distinct) bytes += fixture.objects.get(key)!.byteLength;
        expect(report.bytesRead).toBe(deep ? bytes : 0);
      }
    });

    it('a flipped byte is found only by a deep verify, and blamed on every manifest naming it', async () => {
      const key = fixture.manifests[0]!.manifest.files.find(
        (file) => file.name === 'roles.json',
      )!.key;
      const original = fixture.objects.get(key)!;
      const damaged = original.slice();
      damaged[0]! ^= 1;
      await store.put(key, damaged, { mode: 'overwrite' });
      const shallow = await verify(store, PREFIX);
      expect(shallow.ok).toBe(true);
      const { report, byManifest, latest } = await kindsOf(true);
      expect(report.ok).toBe(false);
      for (const entry of fixture.manifests) expect(byManifest[entry.key]).toEqual(['object-crc']);
      expect(latest).toEqual(['latest-unverified']);
      const problem = report.manifests[0]!.problems[0]!;
      expect(problem.key).toBe(key);
      expect(problem.message).toContain(crc32Hex(original));
      expect(problem.message).toContain(crc32Hex(damaged));
    });

    it('a missing object and a wrong size are found by a shallow verify', async () => {
      const firstSegment = fixture.manifests[0]!.manifest.segments[0]!.key; // gen 0, all of its manifests
      const lastSegment = fixture.manifests.at(-1)!.manifest.segments.at(-1)!.key; // only the last
      await store.delete(firstSegment);
      await store.put(lastSegment, new Uint8Array(3), { mode: 'overwrite' });
      const { byManifest, latest } = await kindsOf(false);
      expect(byManifest[fixture.manifests[0]!.key]).toEqual(['object-missing']);
      expect(byManifest[fixture.manifests[1]!.key]).toEqual(['object-missing']);
      expect(byManifest[fixture.manifests[2]!.key]).toEqual([]);
      expect(byManifest[fixture.manifests[3]!.key]).toEqual(['object-size']);
      expect(latest).toEqual(['latest-unverified']);
    });

    it('reports an unparseable manifest, a lineage mismatch, an unsafe layout and a stray key', async () => {
      const [first, second, third] = fixture.manifests;
      await store.put(first!.key, encode('{"formatVersion": 1, "oops"'), { mode: 'overwrite' });
      const otherLineage = JSON.parse(serializeManifest(second!.manifest));
      otherLineage.segments[0].lineage = 'b'.repeat(32);
      await store.put(second!.key, encode(JSON.stringify(otherLineage)), { mode: 'overwrite' });
      // Parses, but its key says another commit than the manifest.
      await store.put(manifestKey(PREFIX, 99), encode(serializeManifest(third!.manifest)), {
        mode: 'create',
      });
      await store.put(`${PREFIX}/manifest/notes.txt`, encode('hello'), { mode: 'create' });
      const { report, byManifest } = await kindsOf(false);
      expect(report.ok).toBe(false);
      expect(byManifest[first!.key]).toEqual(['manifest-invalid']);
      expect(byManifest[second!.key]).toEqual(['lineage']);
      expect(byManifest[third!.key]).toEqual([]);
      expect(byManifest[manifestKey(PREFIX, 99)]).toEqual(['layout']);
      expect(report.problems.map((problem) => [problem.kind, problem.key])).toEqual([
        ['stray-manifest-key', `${PREFIX}/manifest/notes.txt`],
      ]);
      // listRestorePoints lists the bad ones with their problems instead of failing.
      const points = await listRestorePoints(store, PREFIX);
      expect(points.map((point) => [point.commitSeq, point.status])).toEqual([
        [9, 'problems'],
        [14, 'problems'],
        [17, 'ok'],
        [21, 'ok'],
        [99, 'problems'],
      ]);
    });

    it('a manifest naming a key outside the prefix is reported, and that key is never read', async () => {
      const outside = 'backups/other/side/roles.json/00000000-00000000000000000001';
      await store.put(outside, new Uint8Array([1]), { mode: 'create' });
      const edited = JSON.parse(serializeManifest(fixture.manifests[2]!.manifest));
      edited.files.find((file: { name: string }) => file.name === 'roles.json').key = outside;
      await store.put(fixture.manifests[2]!.key, encode(JSON.stringify(edited)), {
        mode: 'overwrite',
      });
      const { report, byManifest } = await kindsOf(true);
      expect(byManifest[fixture.manifests[2]!.key]).toEqual(['manifest-invalid']);
      expect(report.manifests[2]!.problems[0]!.message).toContain('outside');
    });

    it('a manifest over the size cap is reported without being read whole, and restore refuses it', async () => {
      const huge = new Uint8Array(MAX_MANIFEST_BYTES + 1).fill(0x20);
      await store.put(fixture.latestKey, huge, { mode: 'overwrite' });
      const { byManifest, latest } = await kindsOf(false);
      expect(byManifest[fixture.latestKey]).toEqual(['manifest-invalid']);
      expect(latest).toEqual(['latest-unverified']);
      const error = await restoreFramedStore(store, PREFIX, join(tmpdir(), `never-${Date.now()}`), {
        target: { kind: 'restore-point', manifestKey: fixture.latestKey },
      }).catch((e: unknown) => e);
      expect(RestorePointRejectedError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain(`larger than ${MAX_MANIFEST_BYTES} bytes`);
    });

    it('LATEST: missing, invalid, dangling', async () => {
      await store.delete(latestKey(PREFIX));
      expect((await kindsOf(false)).latest).toEqual(['latest-missing']);
      await store.put(
        latestKey(PREFIX),
        encode('backups/other/manifest/00000000000000000021.json'),
        {
          mode: 'overwrite',
        },
      );
      expect((await kindsOf(false)).latest).toEqual(['latest-invalid']);
      await store.put(latestKey(PREFIX), encode(manifestKey(PREFIX, 30)), { mode: 'overwrite' });
      const dangling = await kindsOf(false);
      expect(dangling.latest).toEqual(['latest-dangling']);
      expect(dangling.report.ok).toBe(false);
      // The manifests themselves are still fine.
      expect(dangling.report.manifests.every((manifest) => manifest.status === 'ok')).toBe(true);
    });

    it('a writer that moves LATEST on and retires the restore point it named: verify follows LATEST', async () => {
      for (const deep of [false, true]) {
        const { live, raced, newest, before } = await stageLatestRace(store, fixture, false);
        const report = await verify(live, PREFIX, { deep });
        expect(raced()).toBe(true);
        expect(report.latest).toEqual({ manifestKey: newest, ok: true, problems: [] });
        expect(report.ok).toBe(true);
        expect(report.manifests.map((manifest) => [manifest.key, manifest.status])).toEqual(
          fixture.manifests.map((entry) => [entry.key, entry.key === before ? 'vanished' : 'ok']),
        );
      }
    });

    it('a LATEST that keeps naming manifests gone by the time they are read: followed a bounded number of times, then reported', async () => {
      let latestReads = 0;
      let next = 100;
      // Every read of LATEST finds it naming a manifest that is never there.
      const chasing = racing(store, async (key) => {
        if (key !== latestKey(PREFIX)) return;
        latestReads += 1;
        next += 1;
        await store.put(latestKey(PREFIX), encode(manifestKey(PREFIX, next)), {
          mode: 'overwrite',
        });
      });
      const report = await verify(chasing, PREFIX);
      expect(latestReads).toBe(1 + MAX_LATEST_FOLLOWS);
      expect(report.latest.manifestKey).toBe(manifestKey(PREFIX, next));
      expect(report.latest.problems.map((problem) => problem.kind)).toEqual(['latest-dangling']);
      expect(report.ok).toBe(false);
      // The manifests LATEST named on the way, never listed, are no entries.
      expect(report.manifests.map((manifest) => manifest.key)).toEqual(
        fixture.manifests.map((entry) => entry.key),
      );
    });

    it('two manifests recording different CRCs for one key: a conflict', async () => {
      const edited = JSON.parse(serializeManifest(fixture.manifests[3]!.manifest));
      edited.segments[0].crc32 = '00000000';
      await store.put(fixture.manifests[3]!.key, encode(JSON.stringify(edited)), {
        mode: 'overwrite',
      });
      const { byManifest } = await kindsOf(true);
      expect(byManifest[fixture.manifests[3]!.key]).toEqual(['object-conflict']);
    });

    it('an empty prefix does not verify: nothing was backed up there', async () => {
      const report = await verify(store, 'backups/nothing');
      expect(report.ok).toBe(false);
      expect(report.latest.problems.map((problem) => problem.kind)).toEqual(['latest-missing']);
      expect(report.manifests).toEqual([]);
    });

    it('reports progress up to every object and byte', async () => {
      const events: VerifyProgress[] = [];
      const report = await verify(store, PREFIX, {
        deep: true,
        onProgress: (event) => events.push(event),
      });
      const last = events.at(-1)!;
      expect(last.phase).toBe('done');
      expect(last.objectsDone).toBe(report.objectsChecked);
      expect(last.objectsTotal).toBe(report.objectsChecked);
      expect(last.bytesDone).toBe(report.bytesRead);
      expect(last.manifestsDone).toBe(fixture.manifests.length);
    });
  });
}

describe('listRestorePoints', () => {
  it('lists commit, range, time, size, generation, lineage and which one LATEST names', async () => {
    const { store, cleanup } = await localStores[0]!.create();
    try {
      const fixture = await writeFixture(store, PREFIX);
      const points = await listRestorePoints(store, PREFIX);
      expect(points.map((point) => point.manifestKey)).toEqual(
        fixture.manifests.map((entry) => entry.key),
      );
      for (const [index, point] of points.entries()) {
        const entry = fixture.manifests[index]!;
        let size = 0;
        for (const file of entry.manifest.files) size += fixture.objects.get(file.key)!.byteLength;
        for (const segment of entry.manifest.segments)
          size += fixture.objects.get(segment.key)!.byteLength;
        expect(point).toEqual({
          manifestKey: entry.key,
          commitSeq: entry.manifest.commitSeq,
          latest: entry.key === fixture.latestKey,
          status: 'ok',
          checked: 'manifest',
          problems: [],
          restorableFrom: entry.generation.base,
          createdAt: entry.manifest.createdAt,
          lineage: fixture.lineage,
          walGeneration: entry.generation.number,
          sizeBytes: size,
          objects: entry.manifest.files.length + entry.manifest.segments.length,
          // Version 1 restore points record no state times.
          formatVersion: 1,
          snapshotTime: null,
          commitTime: null,
        });
      }
      expect(points.filter((point) => point.latest)).toHaveLength(1);
      expect(await listRestorePoints(store, 'backups/none')).toEqual([]);
    } finally {
      await cleanup();
    }
  });
  it('a writer that moves LATEST on and retires the restore point it named: the one LATEST names now is LATEST', async () => {
    const { store, cleanup } = await localStores[0]!.create();
    try {
      const fixture = await writeFixture(store, PREFIX);
      // Written by the writer after the listing, or already listed.
      for (const newestListed of [false, true]) {
        const { live, raced, newest, before } = await stageLatestRace(store, fixture, newestListed);
        const points = await listRestorePoints(live, PREFIX);
        expect(raced()).toBe(true);
        expect(points.map((point) => [point.manifestKey, point.latest])).toEqual(
          fixture.manifests
            .filter((entry) => entry.key !== before)
            .map((entry) => [entry.key, entry.key === newest]),
        );
      }
    } finally {
      await cleanup();
    }
  });
});
