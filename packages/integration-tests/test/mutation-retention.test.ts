/**
 * Retention in the two cases the regular scenario never meets:
 * - a manifest under the prefix cannot be read: it may name anything, so
 *   only the surplus manifests are deleted and every data object stays;
 *   once it is gone, retention deletes the unnamed objects again;
 * - `LATEST` does not name the newest manifest by key (a manifest of this
 *   lineage at a higher commit count is there, as a replica of the same
 *   store directory that got further leaves one): the manifest just written,
 *   which LATEST names, is kept, so LATEST always names one that verifies.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { latestKey, type Manifest, manifestKey, parseLatest, parseManifest } from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket, checkRestorePointContent } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { manualWorker } from './helpers/worker.ts';

const P = 'p';

/** Every key under the prefix that is neither a manifest, LATEST nor the lease. */
async function dataKeys(store: MemoryStore): Promise<Set<string>> {
  const all = await store.list(`${P}/`);
  return new Set(
    all.objects
      .map((o) => o.key)
      .filter((k) => k !== latestKey(P) && !k.startsWith(`${P}/manifest/`) && k !== `${P}/LEASE`),
  );
}

function named(manifests: Iterable<Manifest>): Set<string> {
  const keys = new Set<string>();
  for (const m of manifests) {
    for (const f of m.files) keys.add(f.key);
    for (const s of m.segments) keys.add(s.key);
  }
  return keys;
}

describe('retention', () => {
  let directory: string;
  let engine: FramedTestEngine;
  let store: MemoryStore;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'backup-worker-retention-cases-'));
    engine = await FramedTestEngine.create(directory);
    await engine.commit(3);
    store = new MemoryStore();
  });
  afterEach(() => rm(directory, { recursive: true, force: true }));

  it('deletes only the surplus manifests while a manifest under the prefix cannot be read, and every data object stays', async () => {
    const RETAIN = 2;
    const worker = manualWorker(store, new FramedDirSource({ directory, engine }), {
      retain: RETAIN,
    });
    await worker.runOnce();
    const unreadable = `${P}/manifest/unreadable.json`;
    await store.put(unreadable, new TextEncoder().encode('not a manifest'));

    // Every round a new generation: normally the old ones' snapshots,
    // archives and segments would go with their manifests.
    let before = await dataKeys(store);
    for (let round = 0; round < 4; round += 1) {
      await engine.snapshot({ compact: round % 2 === 1 });
      await engine.commit(1);
      await worker.runOnce();
      const listed = await store.list(`${P}/manifest/`);
      const manifests = new Map<string, Manifest>();
      for (const { key } of listed.objects) {
        if (key === unreadable) continue;
        manifests.set(key, parseManifest((await store.get(key))!.body, { prefix: P }));
      }
      // The surplus manifests went; the unreadable one stays.
      expect(manifests.size).toBe(RETAIN);
      expect(listed.objects.map((o) => o.key)).toContain(unreadable);
      // Nothing else was deleted.
      const after = await dataKeys(store);
      for (const key of before) expect(after.has(key), key).toBe(true);
      before = after;
      // Every kept restore point verifies, and LATEST names the newest.
      for (const manifest of manifests.values()) await checkRestorePointContent(store, P, manifest);
      const latest = parseLatest((await store.get(latestKey(P)))!.body, { prefix: P });
      expect(latest).toBe([...manifests.keys()].sort().at(-1));
      expect(manifests.get(latest)!.commitSeq).toBe(engine.durableCommits);
    }
    const retained = await dataKeys(store);

    // The unreadable manifest is gone: the next retention deletes every
    // snapshot, archive and segment no kept manifest names. (Side files go
    // only with a dropped manifest that names them: those the conservative
    // passes spared stay.)
    await store.delete(unreadable);
    await engine.snapshot();
    await engine.commit(1);
    await worker.runOnce();
    const { manifests } = await checkBucket(store, P, { content: true });
    expect(manifests.size).toBe(RETAIN);
    const kept = named(manifests.values());
    const notSide = (keys: Iterable<string>) =>
      new Set([...keys].filter((k) => !k.startsWith(`${P}/side/`)));
    expect(notSide(await dataKeys(store))).toEqual(notSide(kept));
    expect([...notSide(retained)].some((k) => !kept.has(k))).toBe(true);
  });

  it('keeps the manifest LATEST names when a newer one by key is there, so LATEST always names one that verifies', async () => {
    const worker = manualWorker(store, new FramedDirSource({ directory, engine }), { retain: 1 });
    await worker.runOnce();
    const first = (await checkBucket(store, P, { content: true })).latest!;
    expect(first).toBe(manifestKey(P, 3));
    // A manifest of this lineage at a commit count beyond the store's.
    const ahead = manifestKey(P, 100);
    await store.put(ahead, (await store.get(first))!.body);

    for (let round = 0; round < 3; round += 1) {
      if (round === 1) await engine.snapshot();
      await engine.commit(1);
      await worker.runOnce();
      // LATEST names the manifest just written, which verifies and holds
      // every durable commit; the newest by key is kept as well.
      const check = await checkBucket(store, P, { content: true });
      expect(check.latest).toBe(manifestKey(P, engine.durableCommits));
      expect(check.manifests.get(check.latest!)!.commitSeq).toBe(engine.durableCommits);
      expect([...check.manifests.keys()].sort()).toEqual([check.latest!, ahead]);
    }
  });
});
