import { completeFrames, encodeFrame, FRAME_HEADER_BYTES } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { FramedWalCutter } from './wal-frame-cutter.ts';

function frames(sizes: readonly number[]): Uint8Array[] {
  return sizes.map((size, index) => encodeFrame(new Uint8Array(size).fill(index + 1)));
}

/** Feeds `stream` in chunks of `chunkSize` and returns what was kept. */
function cut(stream: Uint8Array, commits: number, chunkSize: number) {
  const cutter = new FramedWalCutter(commits);
  const kept: Uint8Array[] = [];
  let stoppedEarly = false;
  for (let offset = 0; offset < stream.byteLength; offset += chunkSize) {
    const chunk = stream.subarray(offset, offset + chunkSize);
    const keep = cutter.push(chunk);
    if (stoppedEarly) expect(keep).toBe(0);
    if (keep < chunk.byteLength) stoppedEarly = true;
    kept.push(chunk.subarray(0, keep));
  }
  return { kept: Buffer.concat(kept), cutter };
}

describe('FramedWalCutter with frame weights (batches of commits)', () => {
  /** Frames whose first payload byte says how many commits each stands for. */
  const weighted = (weights: readonly number[]) =>
    weights.map((weight) => encodeFrame(new Uint8Array([weight, 0, 0, 0])));
  const weight = { headerBytes: 1, commitsOf: (header: Uint8Array) => header[0]! };

  it('counts commits, keeps whole frames up to the wanted commit, and names a batch it falls inside', () => {
    const frames = weighted([1, 3, 1]);
    const log = Buffer.concat(frames);
    const at = (n: number) => frames.slice(0, n).reduce((sum, f) => sum + f.byteLength, 0);
    for (const [wanted, keptFrames, kept] of [
      [1, 1, 1],
      [4, 2, 4],
      [5, 3, 5],
    ] as const) {
      const cutter = new FramedWalCutter(wanted, weight);
      expect(cutter.push(log)).toBe(at(keptFrames));
      expect([cutter.commitsSeen, cutter.commitsKept, cutter.straddledBatch]).toEqual([
        5,
        kept,
        null,
      ]);
    }
    for (const wanted of [2, 3]) {
      const cutter = new FramedWalCutter(wanted, weight);
      // Byte by byte: the payload header may arrive in pieces. (Bytes of
      // the straddled batch may have been handed out before its header was
      // complete: restore discards everything once it is straddled.)
      for (const byte of log) cutter.push(new Uint8Array([byte]));
      expect(cutter.commitsKept).toBe(1);
      expect(cutter.straddledBatch).toEqual({ first: 2, last: 4 });
      expect(cutter.commitsSeen).toBe(5);
    }
  });

  it('ends the log at a frame whose header names no commit count', () => {
    const frames = [...weighted([1]), encodeFrame(new Uint8Array([0, 0, 0, 0])), ...weighted([1])];
    const cutter = new FramedWalCutter(3, weight);
    cutter.push(Buffer.concat(frames));
    expect([cutter.commitsSeen, cutter.commitsKept]).toEqual([1, 1]);
  });
});

describe('FramedWalCutter', () => {
  const sizes = [1, 2, 7, 8, 9, 300, 1, 64];
  const all = frames(sizes);
  const stream = Buffer.concat(all);

  it('keeps exactly the first N frames, for every N and every chunking', () => {
    for (const chunkSize of [1, 3, FRAME_HEADER_BYTES, 13, 64, stream.byteLength]) {
      for (let wanted = 0; wanted <= all.length; wanted += 1) {
        const { kept, cutter } = cut(stream, wanted, chunkSize);
        expect(
          kept.equals(Buffer.concat(all.slice(0, wanted))),
          `chunk ${chunkSize}, N ${wanted}`,
        ).toBe(true);
        expect(cutter.commitsKept).toBe(wanted);
        expect(cutter.commitsSeen).toBe(all.length);
      }
    }
  });

  it('counts only complete frames: a torn tail is neither counted nor kept past the cut', () => {
    const torn = Buffer.concat([stream, all[5]!.subarray(0, 20)]);
    const { kept, cutter } = cut(torn, all.length, 5);
    expect(cutter.commitsSeen).toBe(all.length);
    expect(kept.equals(stream)).toBe(true);
  });

  it('a frame with a bad CRC or a zero length ends the log, as completeFrames says', () => {
    const badCrc = Buffer.from(all[3]!);
    badCrc[badCrc.byteLength - 1]! ^= 0xff;
    const zero = new Uint8Array(FRAME_HEADER_BYTES);
    for (const breaker of [badCrc, zero]) {
      const log = Buffer.concat([...all.slice(0, 3), breaker, ...all.slice(4)]);
      for (const chunkSize of [1, 5, log.byteLength]) {
        const { kept, cutter } = cut(log, 3, chunkSize);
        expect(cutter.commitsSeen).toBe(completeFrames(log).frames);
        expect(cutter.commitsSeen).toBe(3);
        expect(kept.equals(Buffer.concat(all.slice(0, 3)))).toBe(true);
        // Asking for more than the log holds: the cutter says it found fewer.
        expect(cut(log, 5, chunkSize).cutter.commitsKept).toBe(3);
      }
    }
  });

  it('asking for more frames than there are keeps everything and says how many it found', () => {
    const { kept, cutter } = cut(stream, all.length + 3, 17);
    expect(kept.equals(stream)).toBe(true);
    expect(cutter.commitsKept).toBe(all.length);
  });
});
