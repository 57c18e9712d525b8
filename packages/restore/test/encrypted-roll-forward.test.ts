/**
 * The searches that read segments no manifest names, over encrypted ones:
 * roll-forward (restore of the latest state, `findRollForward`,
 * `findUnnamedNewerDataAfter`) and the fine run behind a compacted object.
 * A chained segment of another encryption than its generation's ends the
 * chain like any object that does not chain; a missing key throws.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsStore } from '@x/store';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { restore } from '../src/restore.ts';
import { NoRestorePointError, ObjectKeyError } from '../src/restore-errors.ts';
import { findRollForward } from '../src/roll-forward.ts';
import { findUnnamedNewerDataAfter } from '../src/unnamed-newer-data.ts';
import {
  compactFirstTwo,
  keyPair,
  materializer,
  PREFIX,
  SNAPSHOT_COMMITS,
  type WrittenRestorePoint,
  writeRestorePoint,
} from './encrypted-fixture.ts';

const alice = keyPair('alice.txt line 1');
const bob = keyPair('bob.txt line 1');
const carol = keyPair('carol.txt line 1');

let work: string;
let store: FsStore;
let target: string;

beforeEach(async () => {
  work = await mkdtemp(join(tmpdir(), 'encrypted-roll-forward-'));
  store = new FsStore({ root: join(work, 'bucket') });
  target = join(work, 'target');
});
afterEach(async () => {
  await rm(work, { recursive: true, force: true });
});

function logOf(written: WrittenRestorePoint, segments: number, frames?: number): Buffer {
  const log = Buffer.concat(written.segments.slice(0, segments).map((segment) => segment.log));
  if (frames === undefined) return log;
  // The first `frames` frames of the log (each 8 header bytes and its payload).
  let end = 0;
  for (let frame = 0; frame < frames; frame += 1) end += 8 + log.readUInt32LE(end);
  return log.subarray(0, end);
}

describe('roll-forward over encrypted segments', () => {
  it('a restore of the latest state rolls over the chained encrypted segments', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient, bob.recipient],
      named: 2,
      unnamed: 2,
    });
    const result = await restore(store, PREFIX, target, {
      materializer,
      identities: [bob.identity],
    });
    expect(result.rolledForward).toEqual({
      fromCommitSeq: written.manifest.commitSeq,
      segments: 2,
      commits: 2 * written.framesPerSegment,
    });
    expect(result.commitSeq).toBe(written.manifest.commitSeq + 2 * written.framesPerSegment);
    expect(Buffer.compare(await readFile(join(target, 'wal.bin')), logOf(written, 4))).toBe(0);
  });

  for (const [name, recipients] of [
    ['another recipient set', [alice.recipient, carol.recipient]],
    ['no encryption', []],
  ] as const) {
    it(`stops before a chained segment with ${name} (encryption), restoring what chains before it`, async () => {
      const written = await writeRestorePoint(store, {
        recipients: [alice.recipient, bob.recipient],
        differing: { at: 3, recipients },
        named: 2,
        unnamed: 3,
      });
      const result = await restore(store, PREFIX, target, {
        materializer,
        identities: [alice.identity],
      });
      const stoppedKey = written.segments[3]!.entry.key;
      expect(result.rolledForward?.segments).toBe(1);
      expect(result.rolledForward?.stoppedAt?.key).toBe(stoppedKey);
      expect(result.rolledForward?.stoppedAt?.reason).toMatch(/^encryption: /);
      expect(Buffer.compare(await readFile(join(target, 'wal.bin')), logOf(written, 3))).toBe(0);
    });
  }

  it('findRollForward reads its generation encryption from the snapshot header, and throws ObjectKeyError without a key', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      named: 1,
      unnamed: 2,
    });
    const found = await findRollForward(store, PREFIX, written.manifest, {
      identities: [alice.identity],
    });
    expect(found.segments.map((segment) => segment.key)).toEqual(
      written.segments.slice(1).map((segment) => segment.entry.key),
    );
    // The snapshot's header, then each chained segment.
    expect(found.requests.get).toBe(3);

    for (const identities of [[], [carol.identity]]) {
      const error = await findRollForward(store, PREFIX, written.manifest, { identities }).catch(
        (caught: unknown) => caught,
      );
      expect(ObjectKeyError.isInstance(error), String(error)).toBe(true);
      expect((error as ObjectKeyError).objects).toEqual([
        { key: written.segments[1]!.entry.key, recipients: [alice.recipient.text] },
      ]);
    }
  });

  it('findUnnamedNewerDataAfter rolls forward with the identities, and throws ObjectKeyError without', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      named: 1,
      unnamed: 2,
    });
    const found = await findUnnamedNewerDataAfter(store, PREFIX, written.manifestKey, {
      afterRollForward: true,
      identities: [alice.identity],
    });
    expect(found?.rolledForward).toEqual({ segments: 2, commits: 2 * written.framesPerSegment });
    expect(found?.segments).toBe(0);
    const error = await findUnnamedNewerDataAfter(store, PREFIX, written.manifestKey, {
      afterRollForward: true,
    }).catch((caught: unknown) => caught);
    expect(ObjectKeyError.isInstance(error)).toBe(true);
  });
});

describe('the fine segments behind an encrypted compacted object', () => {
  it('restore a commit inside it exactly, opened with the identities', async () => {
    const written = await writeRestorePoint(store, { recipients: [alice.recipient], named: 3 });
    const compacted = await compactFirstTwo(store, written, [alice.recipient], 'merged');
    const inside = SNAPSHOT_COMMITS + written.framesPerSegment + 1;
    const result = await restore(store, PREFIX, target, {
      materializer,
      identities: [alice.identity],
      target: { kind: 'restore-point', manifestKey: compacted.manifestKey, commitSeq: inside },
    });
    expect(result.commitSeq).toBe(inside);
    const wal = await readFile(join(target, 'wal.bin'));
    expect(Buffer.compare(wal, logOf(written, 2, written.framesPerSegment + 1))).toBe(0);
  });

  it('a fine segment of another recipient set does not chain: the commit inside stays refused', async () => {
    const written = await writeRestorePoint(store, {
      recipients: [alice.recipient],
      differing: { at: 1, recipients: [alice.recipient, carol.recipient] },
      named: 3,
    });
    const compacted = await compactFirstTwo(store, written, [alice.recipient], 'merged');
    const inside = SNAPSHOT_COMMITS + written.framesPerSegment + 1;
    const error = await restore(store, PREFIX, target, {
      materializer,
      identities: [alice.identity],
      target: { kind: 'restore-point', manifestKey: compacted.manifestKey, commitSeq: inside },
    }).catch((caught: unknown) => caught);
    expect(NoRestorePointError.isInstance(error), String(error)).toBe(true);
    expect((error as Error).message).toContain('inside a batch');
  });
});
