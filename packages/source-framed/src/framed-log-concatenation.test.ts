import { encodeFrame } from '@x/wal-segment';
import { describe, expect, it } from 'vitest';
import { FramedLogConcatenation, FramedLogConcatenationError } from './framed-log-concatenation.ts';

const frames = (...texts: string[]): Uint8Array =>
  new Uint8Array(Buffer.concat(texts.map((text) => encodeFrame(new TextEncoder().encode(text)))));

describe('FramedLogConcatenation', () => {
  it('returns the bodies’ frames byte for byte, in order, and counts them', () => {
    const merger = new FramedLogConcatenation();
    merger.add(frames('commit-1', 'commit-2'));
    merger.add(frames('commit-3'));
    expect(merger.commits).toBe(3);
    expect(Buffer.from(merger.finish())).toEqual(
      Buffer.from(frames('commit-1', 'commit-2', 'commit-3')),
    );
  });

  it('refuses a body with a torn tail or a frame whose CRC-32 does not match, naming the body and offset', () => {
    const whole = frames('commit-1', 'commit-2');
    const torn = whole.subarray(0, whole.byteLength - 1);
    const merger = new FramedLogConcatenation();
    merger.add(frames('commit-0'));
    expect(() => merger.add(torn)).toThrow(FramedLogConcatenationError);
    expect(() => merger.add(torn)).toThrow(
      /body 2: 15 of its 31 bytes after its last valid frame \(offset 16\)/,
    );
    const flipped = Uint8Array.from(whole);
    flipped[flipped.byteLength - 1] = flipped[flipped.byteLength - 1]! ^ 1;
    expect(() => merger.add(flipped)).toThrow(/after its last valid frame \(offset 16\)/);
    // Nothing refused was taken in.
    expect(merger.commits).toBe(1);
    expect(merger.finish().byteLength).toBe(16);
  });

  it('refuses a run past its bound, and finishing with nothing fed', () => {
    const merger = new FramedLogConcatenation(40);
    merger.add(frames('commit-1', 'commit-2'));
    expect(() => merger.add(frames('commit-3'))).toThrow(
      /more than 40 bytes of log \(48 with body 2\)/,
    );
    expect(() => new FramedLogConcatenation().finish()).toThrow(/nothing was fed/);
  });
});
