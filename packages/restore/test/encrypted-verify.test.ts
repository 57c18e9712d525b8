/**
 * `verify --deep` (and `ls --deep`, and verify's rebuild) over encrypted
 * restore points: with an identity every object is opened and checked;
 * without one each encrypted object is a `key-missing` problem naming its
 * key and recipients, while sizes, stored CRC-32s, headers and the chain
 * are still checked.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RestoreCheck } from '@x/engine';
import { FsStore } from '@x/store';
import { encodeSegmentObject } from '@x/wal-segment';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listRestorePoints } from '../src/list-restore-points.ts';
import { verify } from '../src/verify.ts';
import {
  compactFirstTwo,
  GENERATION,
  keyPair,
  LINEAGE,
  materializer,
  PREFIX,
  putManifest,
  replaceObject,
  type WrittenRestorePoint,
  writeRestorePoint,
} from './encrypted-fixture.ts';

const alice = keyPair('alice.txt line 1');
const bob = keyPair('bob.txt line 1');
const carol = keyPair('carol.txt line 1');

let work: string;
let store: FsStore;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'encrypted-verify-'));
  store = new FsStore({ root: join(work, 'bucket') });
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

function keysOf(written: WrittenRestorePoint): string[] {
  return [written.snapshotKey, ...written.manifest.segments.map((segment) => segment.key)];
}

function storedBytes(written: WrittenRestorePoint): number {
  return [...written.manifest.files, ...written.manifest.segments].reduce(
    (sum, entry) => sum + entry.size,
    0,
  );
}

describe('verify --deep of encrypted restore points', () => {
  it('with an identity opens and checks every object', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      named: 3,
    });
    const report = await verify(store, PREFIX, { deep: true, identities: [bob.identity] });
    expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
    expect(report.objectsChecked).toBe(4);
    expect(report.bytesRead).toBe(storedBytes(written));
  });

  for (const [name, identities] of [
    ['no identity', undefined],
    ['a wrong identity', [carol.identity]],
  ] as const) {
    it(`with ${name}: each encrypted object is key-missing, naming its key and recipients`, async () => {
      const written = await writeRestorePoint(store, {
        recipients: [alice.recipient, bob.recipient],
        named: 2,
      });
      const report = await verify(store, PREFIX, {
        deep: true,
        ...(identities === undefined ? {} : { identities }),
      });
      expect(report.ok).toBe(false);
      expect(report.latest.ok).toBe(false);
      const problems = report.manifests.find((m) => m.key === written.manifestKey)!.problems;
      const recipients = [alice.recipient.text, bob.recipient.text].sort();
      expect(problems.map((problem) => problem.key).sort()).toEqual(keysOf(written).sort());
      for (const problem of problems) {
        expect(problem.kind).toBe('key-missing');
        expect(problem.recipients).toEqual(recipients);
        expect(problem.message).toContain(problem.key);
        for (const recipient of recipients) expect(problem.message).toContain(recipient);
        if (identities !== undefined) expect(problem.message).toContain('carol.txt line 1');
        expect(problem.message).not.toMatch(/AGE-SECRET-KEY/i);
      }
      // Every stored byte was still read for its CRC-32.
      expect(report.bytesRead).toBe(storedBytes(written));
    });
  }

  it('without an identity still checks stored CRC-32s and the chain', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 3 });
    const [first, , last] = written.manifest.segments;
    // A chain link the header states wrong (the last segment, so nothing follows it).
    const relinked = encodeSegmentObject(
      written.segments[2]!.log,
      {
        codec: 'zstd',
        kind: 'segment',
        generation: GENERATION,
        start: 2 * written.segments[0]!.log.byteLength,
        end: 3 * written.segments[0]!.log.byteLength,
        commits: written.framesPerSegment,
        previousCrc32: 0x1234,
        lineage: LINEAGE,
      },
      { recipients: [alice.recipient] },
    );
    await replaceObject(store, written, last!.key, relinked);
    // Stored bytes other than recorded (one byte changed): the snapshot, the first segment.
    for (const key of [written.snapshotKey, first!.key]) {
      const changed = Uint8Array.from((await store.get(key))!.body);
      changed[changed.byteLength - 1]! ^= 1;
      await store.put(key, changed, { mode: 'overwrite' });
    }
    const report = await verify(store, PREFIX, { deep: true });
    const problems = report.manifests.find((m) => m.key === written.manifestKey)!.problems;
    const byKey = new Map(problems.map((problem) => [problem.key, problem]));
    expect(byKey.get(written.snapshotKey)?.kind).toBe('object-crc');
    expect(byKey.get(first!.key)?.kind).toBe('object-crc');
    expect(byKey.get(last!.key)?.kind).toBe('object-encoding');
    expect(byKey.get(last!.key)?.message).toContain('previousCrc32');
    expect(byKey.get(written.manifest.segments[1]!.key)?.kind).toBe('key-missing');
  });

  it('reports an object of another encryption than its generation as object-encoding', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      differing: { at: 1, recipients: [alice.recipient, carol.recipient] },
      named: 2,
    });
    const report = await verify(store, PREFIX, { deep: true, identities: [alice.identity] });
    const problems = report.manifests.find((m) => m.key === written.manifestKey)!.problems;
    expect(problems).toEqual([
      expect.objectContaining({ kind: 'object-encoding', key: written.manifest.segments[1]!.key }),
    ]);
    expect(problems[0]!.message).toContain('encryption: ');
  });

  for (const body of ['fine', 'other'] as const) {
    it(`compares an encrypted compacted object holding ${body === 'fine' ? 'its fine segments' : 'other bytes'} with them, byte for byte`, async () => {
      const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 3 });
      // One restore point names the fine segments, a later one the compacted object.
      await putManifest(store, {
        ...written.manifest,
        commitSeq: written.manifest.commitSeq - written.framesPerSegment,
        segments: written.manifest.segments.slice(0, 2),
      });
      const { manifestKey, compactedKey } = await compactFirstTwo(
        store,
        written,
        [alice.recipient],
        body,
      );
      const report = await verify(store, PREFIX, { deep: true, identities: [alice.identity] });
      expect(report.manifests).toHaveLength(2);
      if (body === 'fine') expect(report.ok, JSON.stringify(report.manifests)).toBe(true);
      else {
        const problems = report.manifests.find((m) => m.key === manifestKey)!.problems;
        expect(problems).toEqual([
          expect.objectContaining({ kind: 'object-encoding', key: compactedKey }),
        ]);
        expect(problems[0]!.message).toContain('byte for byte');
      }
    });
  }

  it('ls --deep takes the identities to verify', async () => {
    await writeRestorePoint(store, { recipients: [alice.recipient], named: 1 });
    const opened = await listRestorePoints(store, PREFIX, {
      deep: true,
      identities: [alice.identity],
    });
    expect(opened.map((point) => point.status)).toEqual(['ok']);
    const locked = await listRestorePoints(store, PREFIX, { deep: true });
    expect(locked.map((point) => point.status)).toEqual(['problems']);
  });

  it('rebuild restores with the identities', async () => {
    await writeRestorePoint(store, { recipients: [alice.recipient], named: 2 });
    const check: RestoreCheck = { name: 'test', recognizes: () => true, materializer };
    const rebuild = { check, scratchDirectory: work };
    const opened = await verify(store, PREFIX, { rebuild, identities: [alice.identity] });
    expect(opened.rebuilt).toBe(1);
    expect(opened.ok, JSON.stringify(opened.manifests)).toBe(true);
    const locked = await verify(store, PREFIX, { rebuild });
    expect(locked.ok).toBe(false);
    expect(locked.manifests[0]!.problems).toEqual([
      expect.objectContaining({
        kind: 'rebuild',
        message: expect.stringContaining('no age identity given opens'),
      }),
    ]);
  });
});
