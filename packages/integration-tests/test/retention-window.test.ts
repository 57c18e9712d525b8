/**
 * Retention by time (`retainFor`): a real worker on a MemoryStore and a fake
 * clock ships a restore point every 10 fake minutes for five hours, each in a
 * new WAL generation (a snapshot between its two commits), with a window of
 * one hour. After every pass:
 * - a restore to the commit at the window's start works: it needs the
 *   restore point just before the window (the first inside starts its
 *   generation after that commit);
 * - exactly the restore points inside the window and the one before it are
 *   kept (with `retain` too: what either keeps), and every data object left
 *   is named by one of them;
 * - every kept restore point verifies and restores to the source's files at
 *   its commit;
 * - the LISTs of the pass stay bounded as with the count: one for the
 *   manifests, one each for snapshots and archives, one per retired
 *   generation; `wal/` is never listed whole.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackupWorker } from '@x/backup-worker';
import { TestHooks } from '@x/backup-worker/testing';
import { FakeClock } from '@x/lease';
import { latestKey, type Manifest } from '@x/manifest';
import { type RestoreTarget, verify } from '@x/restore';
import { FramedDirSource, restoreFramedStore } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkBucket } from './helpers/check-bucket.ts';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { CountingStore } from './helpers/stores.ts';

const P = 'backups/db';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const ROUND = 10 * MINUTE;
const ROUNDS = 30;
/** Files of the source a restore does not reproduce (or writes of its own). */
const NOT_RESTORED = new Set(['snapshot.intent', 'backup.lineage', 'backup.parent']);

interface Shipped {
  readonly key: string;
  readonly commitSeq: number;
  readonly createdAtMs: number;
  /** The source's files when it was written: what a restore of it must produce. */
  readonly files: Map<string, Buffer>;
}

async function sourceFiles(directory: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  for (const name of (await readdir(directory)).sort())
    if (!NOT_RESTORED.has(name)) files.set(name, await readFile(join(directory, name)));
  return files;
}

async function restoredFiles(
  store: MemoryStore,
  target: string,
  options: { target?: RestoreTarget },
): Promise<{ commitSeq: number; manifestKey: string; files: Map<string, Buffer> }> {
  await rm(target, { recursive: true, force: true });
  const result = await restoreFramedStore(store, P, target, { ...options, force: true });
  const files = new Map<string, Buffer>();
  for (const name of (await readdir(target)).sort())
    if (name !== 'backup.parent') files.set(name, await readFile(join(target, name)));
  return { commitSeq: result.commitSeq, manifestKey: result.manifestKey, files };
}

function expectSameFiles(actual: Map<string, Buffer>, expected: Map<string, Buffer>): void {
  expect([...actual.keys()]).toEqual([...expected.keys()]);
  for (const [name, bytes] of expected)
    expect(Buffer.compare(actual.get(name)!, bytes), name).toBe(0);
}

function named(manifests: Iterable<Manifest>): Set<string> {
  const keys = new Set<string>();
  for (const m of manifests) {
    for (const f of m.files) keys.add(f.key);
    for (const s of m.segments) keys.add(s.key);
  }
  return keys;
}

/**
 * What the window keeps, worked out from the shipped restore points alone:
 * those created within `retainFor` of `now`, the newest before them, and
 * (with `retain`) the newest `retain`.
 */
function expectedKept(shipped: readonly Shipped[], now: number, retain?: number): string[] {
  const start = now - HOUR;
  const firstInside = shipped.findIndex((point) => point.createdAtMs >= start);
  let from = Math.max(0, (firstInside === -1 ? shipped.length : firstInside) - 1);
  if (retain !== undefined) from = Math.min(from, Math.max(0, shipped.length - retain));
  return shipped.slice(from).map((point) => point.key);
}

describe('retention by time (retainFor)', () => {
  let directory: string;
  let scratch: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'retention-window-source-'));
    scratch = await mkdtemp(join(tmpdir(), 'retention-window-restored-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
  });

  async function scenario(options: { retain?: number } = {}): Promise<Shipped[]> {
    const inner = new MemoryStore();
    const store = new CountingStore(inner);
    const engine = await FramedTestEngine.create(directory);
    const clock = new FakeClock({ wallMs: Date.parse('2026-06-01T00:00:00.000Z') });
    const hooks = new TestHooks();
    const worker = new BackupWorker({
      store,
      prefix: P,
      source: new FramedDirSource({ directory, engine }),
      clock,
      manifestIntervalMs: 0,
      retainFor: HOUR,
      ...(options.retain === undefined ? {} : { retain: options.retain }),
      hooks,
    });
    const shipped: Shipped[] = [];
    let sawDeletions = false;
    for (let round = 0; round < ROUNDS; round += 1) {
      if (round > 0) clock.advance(ROUND);
      // A new generation between two commits: the restore point of this
      // round covers only from its snapshot on, not the previous round's
      // commit, which only the previous restore point holds.
      await engine.commit(1);
      if (round > 0) await engine.snapshot({ compact: round % 4 === 0 });
      if (round % 3 === 1) await engine.setRoles(`{"round":${round}}`);
      await engine.commit(1);

      const listsBefore = hooks.listRequests();
      const prefixesBefore = store.listPrefixes.length;
      const deletesBefore = store.counts.DELETE;
      await worker.runOnce();
      const listed = store.listPrefixes.slice(prefixesBefore);
      expect(hooks.listRequests() - listsBefore).toBe(listed.length);

      const latest = await checkBucket(inner, P, { content: true });
      const key = latest.latest!;
      expect(latest.manifests.get(key)!.commitSeq).toBe(engine.durableCommits);
      shipped.push({
        key,
        commitSeq: engine.durableCommits,
        createdAtMs: clock.wallNow(),
        files: await sourceFiles(directory),
      });

      const now = clock.wallNow();
      const kept = expectedKept(shipped, now, options.retain);
      const before = shipped.findLast((point) => point.createdAtMs < now - HOUR);
      if (before !== undefined) {
        // The commit at the window's start: restorable, exactly as it was.
        const atStart = await restoredFiles(inner, join(scratch, 'at-start'), {
          target: { kind: 'commit', commitSeq: before.commitSeq },
        });
        expect(atStart.commitSeq).toBe(before.commitSeq);
        expect(atStart.manifestKey).toBe(before.key);
        expectSameFiles(atStart.files, before.files);
      }

      // Exactly the window's restore points (and what the count keeps), and
      // nothing in the data folders that none of them names.
      expect([...latest.manifests.keys()].sort()).toEqual(kept);
      const all = await inner.list(`${P}/`);
      const data = all.objects
        .map((o) => o.key)
        .filter((k) => k !== latestKey(P) && !k.startsWith(`${P}/manifest/`) && k !== `${P}/LEASE`);
      expect(new Set(data)).toEqual(named(latest.manifests.values()));

      // The LISTs stay bounded: the manifests, then, when something was
      // dropped, snapshots and archives and one per retired generation.
      if (round > 0) {
        expect(listed).not.toContain(`${P}/wal/`);
        const generationLists = listed.filter((p) => p.startsWith(`${P}/wal/`)).length;
        expect(generationLists).toBeLessThanOrEqual(2);
        if (store.counts.DELETE === deletesBefore) expect(listed).toEqual([`${P}/manifest/`]);
        else {
          sawDeletions = true;
          expect(listed.length).toBe(3 + generationLists);
        }
      }
    }
    expect(sawDeletions).toBe(true);

    // Every kept restore point verifies and restores to the source at its commit.
    const report = await verify(inner, P, { deep: true });
    expect(report.ok).toBe(true);
    const remaining = (await checkBucket(inner, P)).manifests;
    for (const point of shipped.filter((p) => remaining.has(p.key))) {
      const restored = await restoredFiles(inner, join(scratch, 'kept'), {
        target: { kind: 'restore-point', manifestKey: point.key },
      });
      expect(restored.commitSeq).toBe(point.commitSeq);
      expectSameFiles(restored.files, point.files);
    }
    return shipped.filter((p) => remaining.has(p.key));
  }

  it('keeps the restore points of the last hour and the one before it; the window start restores', async () => {
    const kept = await scenario();
    // Seven rounds in the last hour (0, 10, … 60 minutes ago) and the one before.
    expect(kept).toHaveLength(8);
  });

  it('with retain too, keeps what either keeps', async () => {
    expect(await scenario({ retain: 10 })).toHaveLength(10);
    await rm(directory, { recursive: true, force: true });
    expect(await scenario({ retain: 2 })).toHaveLength(8);
  });
});
