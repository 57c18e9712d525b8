import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { completeFrames, encodeFrame, FRAME_HEADER_BYTES, FrameCounter } from './frames.ts';

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** Feeds `bytes` to a fresh counter split at `cuts` (any positions, any order). */
function countInChunks(bytes: Uint8Array, cuts: readonly number[]): FrameCounter {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const counter = new FrameCounter();
  let previous = 0;
  for (const point of [...points, bytes.length]) {
    counter.push(bytes.subarray(previous, point));
    previous = point;
  }
  return counter;
}

/** A stream of valid frames followed by a tail that may be torn or garbage. */
const streamArbitrary = fc
  .tuple(
    fc.array(
      fc.oneof(
        fc.uint8Array({ minLength: 1, maxLength: 300 }),
        // Above the direct-CRC threshold, so the combining path is covered too.
        fc
          .integer({ min: 4096, max: 9000 })
          .map((length) => new Uint8Array(length).fill(length & 0xff)),
      ),
      { maxLength: 12 },
    ),
    fc.oneof(
      fc.constant(new Uint8Array(0)),
      fc.uint8Array({ maxLength: 40 }),
      // A torn last frame: a valid frame cut short.
      fc.uint8Array({ minLength: 1, maxLength: 100 }).chain((payload) => {
        const frame = encodeFrame(payload);
        return fc.nat({ max: frame.length - 1 }).map((keep) => frame.subarray(0, keep));
      }),
      // A frame whose CRC fails, followed by a valid frame that must not count.
      fc.uint8Array({ minLength: 1, maxLength: 100 }).map((payload) => {
        const frame = encodeFrame(payload);
        frame[FRAME_HEADER_BYTES] = frame[FRAME_HEADER_BYTES]! ^ 0x01;
        return concat([frame, encodeFrame(new Uint8Array([1]))]);
      }),
      // Zero fill, as a crash can leave at the end of a file.
      fc.nat({ max: 64 }).map((length) => new Uint8Array(length)),
    ),
  )
  .map(([payloads, tail]) => ({
    payloads,
    bytes: concat([...payloads.map(encodeFrame), tail]),
    validLength: payloads.reduce((sum, p) => sum + FRAME_HEADER_BYTES + p.length, 0),
  }));

describe('framed log', () => {
  it('encodes length and CRC-32 little-endian before the payload', () => {
    const payload = new TextEncoder().encode('hello');
    const frame = encodeFrame(payload);
    const view = new DataView(frame.buffer);
    expect(frame.length).toBe(13);
    expect(view.getUint32(0, true)).toBe(5);
    expect(view.getUint32(4, true)).toBe(crc32(payload) >>> 0);
    expect(Buffer.from(frame.subarray(8)).toString()).toBe('hello');
    expect(Buffer.from(frame).toString('hex')).toBe('0500000086a6103668656c6c6f');
    expect(() => encodeFrame(new Uint8Array(0))).toThrow(RangeError);
  });

  it('counts the complete, valid prefix and stops at a torn or corrupt frame', () => {
    const a = encodeFrame(new Uint8Array([1, 2, 3]));
    const b = encodeFrame(new Uint8Array(100).fill(7));
    expect(completeFrames(concat([a, b]))).toEqual({ length: a.length + b.length, frames: 2 });
    expect(completeFrames(concat([a, b.subarray(0, 50)]))).toEqual({ length: a.length, frames: 1 });
    expect(completeFrames(concat([a, b.subarray(0, 4)]))).toEqual({ length: a.length, frames: 1 });
    const corrupt = b.slice();
    corrupt[60] = corrupt[60]! ^ 0x80;
    expect(completeFrames(concat([a, corrupt, a]))).toEqual({ length: a.length, frames: 1 });
    const zeroLength = new Uint8Array(8);
    expect(completeFrames(concat([a, zeroLength, a]))).toEqual({ length: a.length, frames: 1 });
    expect(completeFrames(new Uint8Array(0))).toEqual({ length: 0, frames: 0 });
    const huge = new Uint8Array(8);
    new DataView(huge.buffer).setUint32(0, 0xffffffff, true);
    expect(completeFrames(concat([a, huge]))).toEqual({ length: a.length, frames: 1 });
  });

  it('counts the frames it was built from', () => {
    fc.assert(
      fc.property(streamArbitrary, ({ payloads, bytes, validLength }) => {
        expect(completeFrames(bytes)).toEqual({ length: validLength, frames: payloads.length });
      }),
      { numRuns: 300 },
    );
  });

  it('gives the same counts for any split of the stream into chunks', () => {
    fc.assert(
      fc.property(streamArbitrary, fc.array(fc.nat(), { maxLength: 30 }), ({ bytes }, cuts) => {
        const whole = completeFrames(bytes);
        const counter = countInChunks(bytes, cuts);
        expect({ length: counter.completeLength, frames: counter.frames }).toEqual(whole);
        expect(counter.consumed).toBe(bytes.length);
      }),
      { numRuns: 400 },
    );
    // Byte-at-a-time, the most extreme split.
    const bytes = concat([
      encodeFrame(new Uint8Array(20).fill(3)),
      encodeFrame(new Uint8Array([9])),
    ]);
    const counter = countInChunks(bytes, [...bytes.keys()]);
    expect(counter.frames).toBe(2);
    expect(counter.completeLength).toBe(bytes.length);
  });

  it('reports the CRC of the bytes so far in the middle of a payload', () => {
    const bytes = concat([
      encodeFrame(new Uint8Array(50).fill(1)),
      encodeFrame(new Uint8Array(70).fill(2)),
    ]);
    for (const cut of [0, 3, 8, 20, 58, 61, 100, bytes.length]) {
      const counter = new FrameCounter();
      counter.push(bytes.subarray(0, cut));
      expect(counter.crc32, `cut ${cut}`).toBe(crc32(bytes.subarray(0, cut)) >>> 0);
    }
  });

  it('reports ended only for an invalid frame, not for a partial one', () => {
    const a = encodeFrame(new Uint8Array([1, 2, 3]));
    const partial = new FrameCounter();
    partial.push(a.subarray(0, 5));
    expect(partial.ended).toBe(false);
    partial.push(a.subarray(5));
    expect(partial.frames).toBe(1);
    const corrupt = a.slice();
    corrupt[9] = 0;
    const broken = new FrameCounter();
    broken.push(corrupt);
    broken.push(a);
    expect(broken.ended).toBe(true);
    expect(broken.frames).toBe(0);
    expect(broken.completeLength).toBe(0);
  });

  it('never throws on random bytes, and its prefix is itself complete', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 500 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (bytes, cuts) => {
          const { length, frames } = completeFrames(bytes);
          expect(length).toBeLessThanOrEqual(bytes.length);
          expect(completeFrames(bytes.subarray(0, length))).toEqual({ length, frames });
          const counter = countInChunks(bytes, cuts);
          expect(counter.completeLength).toBe(length);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('meta: the chunking property catches a counter that mishandles a header split across chunks', () => {
    // A broken counter: counts each chunk on its own, losing frames that span chunks.
    const brokenCount = (bytes: Uint8Array, cuts: readonly number[]): number => {
      const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort(
        (a, b) => a - b,
      );
      let frames = 0;
      let previous = 0;
      for (const point of [...points, bytes.length]) {
        frames += completeFrames(bytes.subarray(previous, point)).frames;
        previous = point;
      }
      return frames;
    };
    const result = fc.check(
      fc.property(streamArbitrary, fc.array(fc.nat(), { maxLength: 30 }), ({ bytes }, cuts) => {
        expect(brokenCount(bytes, cuts)).toBe(completeFrames(bytes).frames);
      }),
      { numRuns: 400 },
    );
    expect(result.failed).toBe(true);
  });
});
