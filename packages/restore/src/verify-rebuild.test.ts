import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RestoreCheck, RestoreMaterializer, WalCutter } from '@x/engine';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  manifestKey,
  segmentKey,
  serializeLatest,
  serializeManifest,
  snapshotKey,
} from '@x/manifest';
import { MemoryStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import {
  RestoredStateError,
  RestoreOptionsError,
  RestorePointRejectedError,
} from './restore-errors.ts';
import { verify } from './verify.ts';

const PREFIX = 'db';
const LINEAGE = 'lineage-a';
/** A log byte the fake engine's check finds wrong in its rebuilt state. */
const BAD_INTEGRITY = 0xee;
/** A log byte that makes the fake engine rebuild a page other than its objects say. */
const BAD_PAGE = 0xdd;

const scratchRoot = mkdtempSync(join(tmpdir(), 'verify-rebuild-test-'));
afterAll(() => rmSync(scratchRoot, { recursive: true, force: true }));

/** Counts one commit per log byte: a segment of n bytes holds n commits. */
class ByteCutter implements WalCutter {
  commitsSeen = 0;
  commitsKept = 0;
  readonly #wanted: number;
  constructor(wanted: number) {
    this.#wanted = wanted;
  }
  push(chunk: Uint8Array): number {
    const kept = Math.max(0, Math.min(chunk.byteLength, this.#wanted - this.commitsKept));
    this.commitsSeen += chunk.byteLength;
    this.commitsKept += kept;
    return kept;
  }
}

/** A fake engine: its rebuild is the log file; its check reads the log for the bad bytes. */
function fakeCheck(rebuilt: string[], badCommits: readonly number[] = []): RestoreCheck {
  const materializer: RestoreMaterializer = {
    name: 'fake',
    walFileName: 'log.bin',
    parentRecordName: 'fake.parent',
    targetName: (entry) => (entry.name === 'fake.snapshot' ? 'snapshot.bin' : null),
    createWalCutter: (commits) => new ByteCutter(commits),
    ownsName: () => true,
    async finish(staged) {
      rebuilt.push(staged.directory);
      const log = readFileSync(join(staged.directory, 'log.bin'));
      const where = `commit ${staged.commitSeq}`;
      if (log.includes(BAD_INTEGRITY) || badCommits.includes(staged.commitSeq))
        throw new RestoredStateError(where, [
          { check: 'integrity-check', message: 'integrity_check answers: Page 3: btree broken' },
        ]);
      if (log.includes(BAD_PAGE))
        throw new RestoredStateError(where, [
          {
            check: 'page-hash',
            message: 'page 2 differs',
            page: 2,
            expected: '00112233',
            found: '44556677',
          },
        ]);
      return staged.names;
    },
  };
  return {
    name: 'fake',
    recognizes: (manifest) => manifest.files.some((file) => file.name === 'fake.snapshot'),
    materializer,
  };
}

/**
 * Puts a restore point of `generation`: a snapshot and one segment per
 * entry of `logs` (each byte one commit), commits counted from `base`.
 */
async function putRestorePoint(
  store: MemoryStore,
  generation: number,
  base: number,
  logs: readonly number[][],
  snapshotName = 'fake.snapshot',
): Promise<string> {
  const snapshot = new Uint8Array([1, 2, 3]);
  const snapshotObject = snapshotKey(PREFIX, generation, 0);
  await store.put(snapshotObject, snapshot);
  let start = 0;
  const segments: Manifest['segments'] = [];
  for (const log of logs) {
    const bytes = new Uint8Array(log);
    const key = segmentKey(PREFIX, generation, start, start + bytes.byteLength);
    await store.put(key, bytes);
    segments.push({
      key,
      size: bytes.byteLength,
      crc32: crc32Hex(bytes),
      frames: bytes.byteLength,
      lineage: LINEAGE,
    });
    start += bytes.byteLength;
  }
  const manifest: Manifest = {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-05T00:00:00Z',
    commitSeq: base + start,
    oldestCommitSeq: base,
    walGeneration: generation,
    files: [
      {
        name: snapshotName,
        key: snapshotObject,
        size: snapshot.byteLength,
        crc32: crc32Hex(snapshot),
        frames: 0,
        lineage: LINEAGE,
      },
    ],
    segments,
  };
  const key = manifestKey(PREFIX, manifest.commitSeq);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })));
  await store.put(latestKey(PREFIX), new TextEncoder().encode(serializeLatest(key)));
  return key;
}

/** Two generations of two restore points each; `damage` goes into generation 0's second segment. */
async function twoGenerations(
  damage: number[] = [9],
): Promise<{ store: MemoryStore; keys: string[] }> {
  const store = new MemoryStore();
  const keys = [
    await putRestorePoint(store, 0, 5, [[1, 2]]),
    await putRestorePoint(store, 0, 5, [[1, 2], damage]),
    await putRestorePoint(store, 1, 20, [[3, 4, 5]]),
    await putRestorePoint(store, 1, 20, [[3, 4, 5], [6]]),
  ];
  return { store, keys };
}

function scratch(): string {
  return mkdtempSync(join(scratchRoot, 'scratch-'));
}

describe('verify with rebuild', () => {
  it('rebuilds the newest restore point of each generation by default, in a scratch directory it removes', async () => {
    const { store, keys } = await twoGenerations();
    const directories: string[] = [];
    const directory = scratch();
    const report = await verify(store, PREFIX, {
      deep: true,
      rebuild: { check: fakeCheck(directories), scratchDirectory: directory },
    });
    expect(report.ok).toBe(true);
    expect(report.rebuilt).toBe(2);
    expect(report.manifests.filter((m) => m.rebuilt).map((m) => m.key)).toEqual([keys[1], keys[3]]);
    expect(directories.every((staging) => staging.startsWith(directory))).toBe(true);
    expect(readdirSync(directory)).toEqual([]);
  });

  it('rebuilds every restore point with points: all', async () => {
    const { store } = await twoGenerations();
    const report = await verify(store, PREFIX, {
      rebuild: { check: fakeCheck([]), points: 'all', scratchDirectory: scratch() },
    });
    expect(report.ok).toBe(true);
    expect(report.rebuilt).toBe(4);
    expect(report.manifests.every((m) => m.rebuilt === true)).toBe(true);
  });

  it('reports a restore point whose rebuilt state fails the engine check, naming it, and LATEST stays ok', async () => {
    const { store, keys } = await twoGenerations([BAD_INTEGRITY]);
    const directory = scratch();
    const report = await verify(store, PREFIX, {
      deep: true,
      rebuild: { check: fakeCheck([]), scratchDirectory: directory },
    });
    expect(report.ok).toBe(false);
    const failed = report.manifests.filter((m) => m.status === 'problems');
    expect(failed.map((m) => m.key)).toEqual([keys[1]]);
    expect(failed[0]!.problems).toEqual([
      { kind: 'integrity-check', message: 'integrity_check answers: Page 3: btree broken' },
    ]);
    expect(report.latest.ok).toBe(true);
    expect(readdirSync(directory)).toEqual([]);
  });

  it('reports a page whose hash differs with the page, expected and found hashes', async () => {
    const { store, keys } = await twoGenerations([BAD_PAGE]);
    const report = await verify(store, PREFIX, {
      rebuild: { check: fakeCheck([]), scratchDirectory: scratch() },
    });
    expect(report.ok).toBe(false);
    const failed = report.manifests.find((m) => m.key === keys[1])!;
    expect(failed.problems).toEqual([
      {
        kind: 'page-hash',
        message: 'page 2 differs',
        page: 2,
        expected: '00112233',
        found: '44556677',
      },
    ]);
  });

  it('finds damage in an older restore point only with points: all', async () => {
    const { store, keys } = await twoGenerations();
    // Commit 7 (generation 0's older restore point) rebuilds wrong; its newer one does not.
    const check = fakeCheck([], [7]);
    const byDefault = await verify(store, PREFIX, {
      rebuild: { check, scratchDirectory: scratch() },
    });
    expect(byDefault).toMatchObject({ ok: true, rebuilt: 2 });
    const every = await verify(store, PREFIX, {
      rebuild: { check, points: 'all', scratchDirectory: scratch() },
    });
    expect(every).toMatchObject({ ok: false, rebuilt: 4 });
    expect(every.manifests.filter((m) => m.status === 'problems').map((m) => m.key)).toEqual([
      keys[0],
    ]);
  });

  it('rebuilds no restore point the check does not recognize, and a restore refusal is a rebuild problem', async () => {
    const store = new MemoryStore();
    await putRestorePoint(store, 0, 5, [[1, 2]], 'other.snapshot');
    const report = await verify(store, PREFIX, {
      rebuild: { check: fakeCheck([]), scratchDirectory: scratch() },
    });
    expect(report).toMatchObject({ ok: true, rebuilt: 0 });

    const refusing = fakeCheck([]);
    const check: RestoreCheck = {
      ...refusing,
      recognizes: () => true,
      materializer: {
        ...refusing.materializer,
        targetName: () => {
          throw new RestorePointRejectedError('x', ['no such layout']);
        },
      },
    };
    const refused = await verify(store, PREFIX, {
      rebuild: { check, scratchDirectory: scratch() },
    });
    expect(refused.ok).toBe(false);
    expect(refused.manifests[0]!.problems).toEqual([
      {
        kind: 'rebuild',
        message: expect.stringMatching(
          /^the restore of db\/manifest\/0+7\.json fails: .*no such layout/,
        ),
      },
    ]);
  });

  it('follows LATEST when a writer retires its target mid-rebuild, and rebuilds the restore point that replaced it', async () => {
    const { store, keys } = await twoGenerations();
    const base = fakeCheck([]);
    let replacement: string | null = null;
    const check: RestoreCheck = {
      ...base,
      recognizes(manifest) {
        if (replacement === null) {
          replacement = '';
          // What a live writer does between verify's checks and its rebuild.
          void (async () => {
            replacement = await putRestorePoint(store, 1, 20, [[3, 4, 5], [6], [7]]);
            await store.delete(keys[3]!);
          })();
        }
        return base.recognizes(manifest);
      },
    };
    const report = await verify(store, PREFIX, {
      deep: true,
      rebuild: { check, scratchDirectory: scratch() },
    });
    expect(replacement).toMatch(/manifest\/0+25\.json$/);
    expect(report.latest).toEqual({ manifestKey: replacement, ok: true, problems: [] });
    expect(report.ok).toBe(true);
    expect(report.manifests.find((m) => m.key === keys[3])?.status).toBe('vanished');
    expect(report.manifests.filter((m) => m.rebuilt).map((m) => m.key)).toEqual([
      keys[1],
      replacement,
    ]);
  });

  it('refuses a scratch directory that does not exist before reading anything', async () => {
    const { store } = await twoGenerations();
    await expect(
      verify(store, PREFIX, {
        rebuild: { check: fakeCheck([]), scratchDirectory: join(scratchRoot, 'missing') },
      }),
    ).rejects.toBeInstanceOf(RestoreOptionsError);
  });
});
