import { type FileEntry, manifestKey } from '@x/manifest';
import { describe, expect, it } from 'vitest';
import { buildRestorePoint } from './restore-point-builder.ts';
import { noteShippedTime, Tenure } from './tenure.ts';

function entry(name: string, frames: number, lineage = 'L'): FileEntry {
  return { name, key: `db/x/${name}`, size: 1, crc32: '00000000', frames, lineage };
}

function tenureWithGeneration(): Tenure {
  const tenure = new Tenure();
  tenure.lineage = 'L';
  tenure.snapshot = entry('snapshot.bin', 0);
  tenure.archives.set(2, { length: 1, entry: entry('wal.2.archive', 3), verified: true });
  tenure.archives.set(1, { length: 1, entry: entry('wal.1.archive', 4), verified: true });
  tenure.archives.set(9, { length: 1, entry: entry('wal.9.archive', 100), verified: true });
  tenure.baseArchives = [1, 2];
  tenure.side.set('roles.json', {
    identity: 'i',
    content: 'roles.json/c',
    entry: entry('roles.json', 0),
  });
  tenure.current = {
    number: 7,
    key: { engineGeneration: 'g1', snapshot: 's', wal: 'w' },
    cursor: 20,
    inRestorePoint: 0,
    startedAt: 0,
    floor: 10,
    chain: [entry('wal.floor', 0)],
    segments: [{ key: 'db/wal/seg', size: 20, crc32: '00000000', frames: 2, lineage: 'L' }],
    snapshotTime: null,
    commitTime: null,
  };
  return tenure;
}

describe('buildRestorePoint', () => {
  it('names the snapshot, the base archives in chain order, chain and side files, and the segments', () => {
    const built = buildRestorePoint('db', tenureWithGeneration(), Date.UTC(2026, 0, 1), 4);
    expect(built?.manifest.files.map((f) => f.name)).toEqual([
      'snapshot.bin',
      'wal.1.archive',
      'wal.2.archive',
      'wal.floor',
      'roles.json',
    ]);
    expect(built?.manifest.segments.map((s) => s.key)).toEqual(['db/wal/seg']);
    expect(built?.manifest).toMatchObject({
      lineage: 'L',
      walGeneration: 7,
      oldestCommitSeq: 10,
      createdAt: '2026-01-01T00:00:00.000Z',
    });
  });

  it('computes commitSeq from the objects it names (floor + archive and segment frames)', () => {
    const built = buildRestorePoint('db', tenureWithGeneration(), 0, 4);
    expect(built?.manifest.commitSeq).toBe(10 + 4 + 3 + 2);
    expect(built?.key).toBe(manifestKey('db', 19));
  });

  it('copies the segment list (later shipping does not change a built manifest)', () => {
    const tenure = tenureWithGeneration();
    const built = buildRestorePoint('db', tenure, 0, 4);
    tenure.current?.segments.push({
      key: 'db/wal/more',
      size: 1,
      crc32: '00000000',
      frames: 1,
      lineage: 'L',
    });
    expect(built?.manifest.segments).toHaveLength(1);
  });

  it("refuses a restore point naming another lineage's object", () => {
    const tenure = tenureWithGeneration();
    tenure.side.set('keys.json', {
      identity: 'k',
      content: 'keys.json/c',
      entry: entry('keys.json', 0, 'other'),
    });
    expect(() => buildRestorePoint('db', tenure, 0, 4)).toThrow(/lineage/);
  });

  it('writes format version 3 with the lease generation, the source’s snapshot time and the newest shipped commit’s', () => {
    const tenure = tenureWithGeneration();
    const generation = { ...tenure.current!, snapshotTime: 1_000, commitTime: 1_000 };
    tenure.current = generation;
    expect(buildRestorePoint('db', tenure, 0, 4)?.manifest).toMatchObject({
      formatVersion: 3,
      leaseGeneration: 4,
      snapshotTime: '1970-01-01T00:00:01.000Z',
      commitTime: '1970-01-01T00:00:01.000Z',
    });
    noteShippedTime(generation, { frames: 2, lastCommitTime: 1_500 });
    expect(buildRestorePoint('db', tenure, 0, 4)?.manifest.commitTime).toBe(
      '1970-01-01T00:00:01.500Z',
    );
    // A clock stepped back never dates the newest state before the snapshot.
    noteShippedTime(generation, { frames: 1, lastCommitTime: 900 });
    expect(buildRestorePoint('db', tenure, 0, 4)?.manifest.commitTime).toBe(
      '1970-01-01T00:00:01.500Z',
    );
    // A range of unknown time makes the newest state's time unknown.
    noteShippedTime(generation, { frames: 1 });
    expect(buildRestorePoint('db', tenure, 0, 4)?.manifest).toMatchObject({
      snapshotTime: '1970-01-01T00:00:01.000Z',
      commitTime: null,
    });
  });

  it('is null without a current generation', () => {
    expect(buildRestorePoint('db', new Tenure(), 0, 4)).toBeNull();
  });
});
