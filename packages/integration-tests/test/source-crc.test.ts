/**
 * A source's own CRC of a WAL range (`WalRange.crc32`): the worker writes
 * it as the decoded CRC-32 in the segment's envelope header without reading
 * the bytes again, so a right one verifies, and a wrong one is caught by a
 * deep verify (the decoded bytes do not match it): never silently accepted.
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WalRange } from '@x/engine';
import { crc32 } from '@x/manifest';
import { verify } from '@x/restore';
import { FramedDirSource } from '@x/source-framed';
import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { FramedTestEngine } from './helpers/framed-engine.ts';
import { manualWorker } from './helpers/worker.ts';

/** Hands out every range with a CRC of its own: the true one, or one bit off. */
class SourceWithCrc extends FramedDirSource {
  flipBit = false;
  override async readWalRange(
    ...args: Parameters<FramedDirSource['readWalRange']>
  ): Promise<WalRange | null> {
    const range = await super.readWalRange(...args);
    if (range === null) return null;
    const own = crc32(range.bytes);
    return { ...range, crc32: this.flipBit ? (own ^ 1) >>> 0 : own };
  }
}

async function backUp(flipBit: boolean) {
  const directory = await mkdtemp(join(tmpdir(), 'backup-worker-source-crc-'));
  try {
    const engine = await FramedTestEngine.create(directory);
    await engine.commit(3);
    const source = new SourceWithCrc({ directory, engine });
    source.flipBit = flipBit;
    const store = new MemoryStore();
    const worker = manualWorker(store, source);
    await worker.runOnce();
    await engine.commit(2);
    await worker.runOnce();
    return await verify(store, 'p', { deep: true });
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

describe('WalRange.crc32', () => {
  it("is the segment's CRC: a right one verifies", async () => {
    const report = await backUp(false);
    expect(report.ok).toBe(true);
    expect(report.manifests.length).toBeGreaterThan(0);
  });

  it('is taken as given: a wrong one fails the deep verify of that segment', async () => {
    const report = await backUp(true);
    expect(report.ok).toBe(false);
    const problems = report.manifests.flatMap((manifest) => manifest.problems);
    expect(problems.length).toBeGreaterThan(0);
    for (const problem of problems) {
      expect(problem.kind).toBe('object-encoding');
      expect(problem.message).toContain('bodyCrc32');
      expect(problem.key).toMatch(/\/wal\//);
    }
  });
});
