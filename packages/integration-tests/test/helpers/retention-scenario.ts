/**
 * Retention keeps exactly N manifests of this lineage and deletes exactly the
 * objects no kept manifest names; its LIST requests are bounded (one for the
 * manifests, one each for snapshots and archives, one per retired
 * generation), and `wal/` is never listed whole.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { TestHooks } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { latestKey, type Manifest } from '@x/manifest';
import { FramedDirSource } from '@x/source-framed';
import { expect } from 'vitest';
import { checkBucket } from './check-bucket.ts';
import { FramedTestEngine } from './framed-engine.ts';
import { CountingStore, type StoreCase } from './stores.ts';

const RETAIN = 3;

/** Runs `rounds` steps with snapshots, compactions and side-file changes, checking retention after each. */
export async function retentionScenario(storeCase: StoreCase, rounds = 14): Promise<void> {
  const { store: inner, prefix, close } = await storeCase.open();
  const directory = await mkdtemp(join(tmpdir(), 'backup-worker-retention-'));
  try {
    const store = new CountingStore(inner);
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(2);
    await engine.snapshot();
    const hooks = new TestHooks();
    const worker = new BackupWorker({
      store,
      prefix,
      source: new FramedDirSource({ directory, engine }),
      clock: new FakeClock(),
      manifestIntervalMs: 0,
      retain: RETAIN,
      hooks,
    });
    let written = 0;
    for (let round = 0; round < rounds; round += 1) {
      if (round % 4 === 3) await engine.snapshot({ compact: round % 8 === 7 });
      if (round % 3 === 1) await engine.setRoles(`{"round":${round}}`);
      await engine.commit(1);
      const listsBefore = hooks.listRequests();
      const prefixesBefore = store.listPrefixes.length;
      const getsBefore = store.counts.GET;
      await worker.runOnce();
      written += 1;
      const lists = hooks.listRequests() - listsBefore;
      const listed = store.listPrefixes.slice(prefixesBefore);
      expect(lists).toBe(listed.length);
      if (round > 0) {
        // Never the whole wal/ after resume; one LIST per retired generation at most.
        expect(listed).not.toContain(`${prefix}/wal/`);
        const generationLists = listed.filter((p) => p.startsWith(`${prefix}/wal/`)).length;
        expect(lists).toBeLessThanOrEqual(3 + generationLists);
        expect(generationLists).toBeLessThanOrEqual(2);
        // Manifests are read once per version: this worker's own are never
        // read back, so a step after resume makes no GET at all.
        expect(store.reads.slice(store.reads.length - (store.counts.GET - getsBefore))).toEqual([]);
      }

      const { manifests, latest } = await checkBucket(inner, prefix, { content: true });
      expect(manifests.size).toBe(Math.min(RETAIN, written));
      expect(latest).toBe([...manifests.keys()].sort().at(-1));
      // Every object in the data folders is named by a kept manifest,
      // except the current generation's segments, which later manifests
      // keep naming (none here: each manifest names all of them).
      const all = await inner.list(`${prefix}/`);
      const data = all.objects
        .map((o) => o.key)
        .filter(
          (k) =>
            k !== latestKey(prefix) &&
            !k.startsWith(`${prefix}/manifest/`) &&
            k !== `${prefix}/LEASE`,
        );
      expect(new Set(data)).toEqual(named(manifests.values()));
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
    await close();
  }
}

function named(manifests: Iterable<Manifest>): Set<string> {
  const keys = new Set<string>();
  for (const m of manifests) {
    for (const f of m.files) keys.add(f.key);
    for (const s of m.segments) keys.add(s.key);
  }
  return keys;
}
