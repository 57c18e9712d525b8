/**
 * The SQLite engine's check for `verify` with `rebuild`: a sound restore
 * point rebuilds and passes; one whose rebuilt database fails
 * `PRAGMA integrity_check`, or whose log patches a page it has no base for,
 * is reported against its manifest; a rebuilt page that is not the one its
 * objects say is reported with its page and both hashes.
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
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
import { verify } from '@x/restore';
import { MemoryStore } from '@x/store';
import { afterAll, describe, expect, it } from 'vitest';
import { type CommitRecord, encodeCommitFrame } from '../src/commit-record.ts';
import type { PatchRun } from '../src/page-patch.ts';
import { pageHashMismatch, sqliteRestoreCheck } from '../src/restore-check.ts';
import { imageDigest } from '../src/resume-record.ts';

const PREFIX = 'p';
const LINEAGE = 'lineage-a';
const PAGE = 4096;
const root = mkdtempSync(join(tmpdir(), 'restore-check-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A database file in rollback mode (the whole state in the file), and its bytes. */
function database(name: string, rows: number, from?: string): { path: string; bytes: Buffer } {
  const path = join(root, name);
  if (from !== undefined) copyFileSync(from, path);
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA page_size = ${PAGE}; PRAGMA journal_mode = DELETE`);
  db.exec('CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  const insert = db.prepare("INSERT INTO t (body) VALUES (printf('%0800d', ?))");
  for (let row = 0; row < rows; row += 1) insert.run(row);
  db.close();
  return { path, bytes: readFileSync(path) };
}

function pagesOf(bytes: Buffer): Map<number, Uint8Array> {
  const pages = new Map<number, Uint8Array>();
  for (let at = 0; at < bytes.byteLength; at += PAGE)
    pages.set(at / PAGE + 1, new Uint8Array(bytes.subarray(at, at + PAGE)));
  return pages;
}

function record(
  databasePages: number,
  pages: Map<number, Uint8Array>,
  patches?: Map<number, PatchRun[]>,
): CommitRecord {
  return {
    pageSize: PAGE,
    databasePages,
    commitTime: Date.parse('2026-12-05T00:00:00Z'),
    walSalt1: 0,
    walSalt2: 0,
    commitFrame: 0,
    pages,
    ...(patches === undefined ? {} : { patches }),
  };
}

/** A restore point of generation 0: `snapshot` and one segment of `records`, one commit each. */
async function prefixOf(snapshot: Uint8Array, records: CommitRecord[]): Promise<MemoryStore> {
  const store = new MemoryStore();
  const snapshotObject = snapshotKey(PREFIX, 0, 0);
  await store.put(snapshotObject, snapshot);
  const log = Buffer.concat(records.map((r) => encodeCommitFrame(r)));
  const segment = segmentKey(PREFIX, 0, 0, log.byteLength);
  await store.put(segment, log);
  const manifest: Manifest = {
    formatVersion: 1,
    lineage: LINEAGE,
    createdAt: '2026-12-05T00:00:00Z',
    commitSeq: records.length,
    oldestCommitSeq: 0,
    walGeneration: 0,
    files: [
      {
        name: 'sqlite.snapshot',
        key: snapshotObject,
        size: snapshot.byteLength,
        crc32: crc32Hex(snapshot),
        frames: 0,
        lineage: LINEAGE,
      },
    ],
    segments: [
      {
        key: segment,
        size: log.byteLength,
        crc32: crc32Hex(log),
        frames: records.length,
        lineage: LINEAGE,
      },
    ],
  };
  const key = manifestKey(PREFIX, manifest.commitSeq);
  await store.put(key, new TextEncoder().encode(serializeManifest(manifest, { prefix: PREFIX })));
  await store.put(latestKey(PREFIX), new TextEncoder().encode(serializeLatest(key)));
  return store;
}

async function verifyRebuilt(store: MemoryStore) {
  const scratch = mkdtempSync(join(root, 'scratch-'));
  const report = await verify(store, PREFIX, {
    deep: true,
    rebuild: { check: sqliteRestoreCheck(), scratchDirectory: scratch },
  });
  // Every rebuild's directory is gone, whatever it found.
  expect(readdirSync(scratch)).toEqual([]);
  return report;
}

async function* chunks(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

const before = database('before.db', 10);
const after = database('after.db', 40, before.path);

describe('sqliteRestoreCheck', () => {
  it('passes a restore point that rebuilds to a sound database whose pages its objects predict', async () => {
    const store = await prefixOf(before.bytes, [
      record(after.bytes.byteLength / PAGE, pagesOf(after.bytes)),
    ]);
    const report = await verifyRebuilt(store);
    expect(report).toMatchObject({ ok: true, rebuilt: 1 });
    expect(report.manifests[0]).toMatchObject({ status: 'ok', rebuilt: true });
  });

  it('reports integrity_check failing on the rebuilt database, with its first lines', async () => {
    const pages = pagesOf(after.bytes);
    // Page 2 (the table's root) overwritten: every CRC agrees, SQLite does not.
    pages.set(2, new Uint8Array(PAGE).fill(0x55));
    const store = await prefixOf(before.bytes, [record(after.bytes.byteLength / PAGE, pages)]);
    const report = await verifyRebuilt(store);
    expect(report.ok).toBe(false);
    expect(report.latest.ok).toBe(false);
    const [point] = report.manifests;
    expect(point).toMatchObject({ key: manifestKey(PREFIX, 1), status: 'problems', rebuilt: true });
    expect(point!.problems).toHaveLength(1);
    expect(point!.problems[0]!.kind).toBe('integrity-check');
    expect(point!.problems[0]!.message).toMatch(
      /^PRAGMA integrity_check of the rebuilt database answers: .+/,
    );
  });

  it('reports a patch of a page the snapshot does not have (the shrink-regrow damage)', async () => {
    const snapshotPages = before.bytes.byteLength / PAGE;
    const pages = pagesOf(after.bytes);
    // Every page past the snapshot's end is sent as a patch of its non-zero
    // bytes: a base the restore does not hold.
    const patches = new Map<number, PatchRun[]>();
    for (const [pageNumber, page] of pages) {
      if (pageNumber <= snapshotPages) continue;
      pages.delete(pageNumber);
      patches.set(pageNumber, [{ offset: 0, bytes: page.slice(0, 64) }]);
    }
    const store = await prefixOf(before.bytes, [
      record(after.bytes.byteLength / PAGE, pages, patches),
    ]);
    const report = await verifyRebuilt(store);
    expect(report.ok).toBe(false);
    const [point] = report.manifests;
    expect(point).toMatchObject({ status: 'problems', rebuilt: true });
    expect(point!.problems.length).toBeGreaterThan(0);
    expect(['rebuild', 'integrity-check']).toContain(point!.problems[0]!.kind);
  });

  it('names the first page whose hash differs, with both hashes', async () => {
    const expected = await imageDigest(chunks(after.bytes), PAGE);
    const tampered = Buffer.from(after.bytes);
    tampered[2 * PAGE + 100]! ^= 0xff;
    const found = await imageDigest(chunks(tampered), PAGE);
    const mismatch = pageHashMismatch(expected, found, PAGE);
    expect(mismatch).toMatchObject({
      check: 'page-hash',
      page: 3,
      expected: Buffer.from(expected.pageHashes, 'base64').subarray(16, 24).toString('hex'),
      found: Buffer.from(found.pageHashes, 'base64').subarray(16, 24).toString('hex'),
    });
    expect(pageHashMismatch(expected, expected, PAGE)).toBeNull();
    // A rebuilt file shorter than its objects say: the first missing page.
    const short = await imageDigest(chunks(after.bytes.subarray(0, 3 * PAGE)), PAGE);
    expect(pageHashMismatch(expected, short, PAGE)).toMatchObject({
      page: 4,
      found: '(no such page)',
    });
  });
});
