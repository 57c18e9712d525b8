import { describe, expect, it } from 'vitest';
import { framedStoreMaterializer } from './framed-materializer.ts';

describe('framedStoreMaterializer', () => {
  const manifest = {
    formatVersion: 1 as const,
    lineage: 'l',
    createdAt: '2026-11-29T09:00:00Z',
    commitSeq: 0,
    oldestCommitSeq: 0,
    walGeneration: 0,
    files: [],
    segments: [],
  };
  const entry = (name: string) => ({
    name,
    key: 'p/x',
    size: 0,
    crc32: '00000000',
    frames: 0,
    lineage: 'l',
  });

  it('leaves backup.lineage out, refuses wal.bin, snapshot.intent and backup.parent, keeps the rest by name', () => {
    expect(framedStoreMaterializer.targetName(entry('backup.lineage'), manifest)).toBeNull();
    for (const name of ['snapshot.bin', 'wal.3.archive', 'wal.floor', 'roles.json', 'keys.json']) {
      expect(framedStoreMaterializer.targetName(entry(name), manifest)).toBe(name);
    }
    for (const name of ['wal.bin', 'snapshot.intent', 'backup.parent']) {
      expect(() => framedStoreMaterializer.targetName(entry(name), manifest)).toThrow(
        /never carries/,
      );
    }
  });

  it('owns the store layout names and nothing else', () => {
    for (const name of [
      'snapshot.bin',
      'wal.bin',
      'snapshot.intent',
      'wal.12.archive',
      'backup.lineage',
      'backup.parent',
      'wal.floor',
    ]) {
      expect(framedStoreMaterializer.ownsName(name)).toBe(true);
    }
    for (const name of ['notes.txt', 'wal.bin.bak', 'wal.x.archive', 'database.sqlite']) {
      expect(framedStoreMaterializer.ownsName(name)).toBe(false);
    }
  });
});
