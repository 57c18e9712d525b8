import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FrameWriterError } from './errors.ts';
import { FrameWriter } from './frame-writer.ts';
import { completeFrames, encodeFrame } from './frames.ts';
import { readNewSegment } from './read-segment.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'wal-segment-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const payload = (length: number, fill: number): Uint8Array => new Uint8Array(length).fill(fill);

describe('FrameWriter', () => {
  it('appends frames, and sync advances the durable length', async () => {
    const path = join(dir, 'wal.bin');
    const writer = await FrameWriter.open(path);
    expect(writer.length).toBe(0);
    await writer.append(payload(10, 1));
    await writer.append(payload(20, 2));
    expect(writer.length).toBe(46);
    expect(writer.durableLength).toBe(0);
    await writer.sync();
    expect(writer.durableLength).toBe(46);
    await writer.close();
    const bytes = await readFile(path);
    expect(completeFrames(bytes)).toEqual({ length: 46, frames: 2 });
    expect(Buffer.from(bytes.subarray(0, 18))).toEqual(Buffer.from(encodeFrame(payload(10, 1))));
  });

  it('orders concurrent appends as called', async () => {
    const path = join(dir, 'wal.bin');
    const writer = await FrameWriter.open(path);
    await Promise.all(Array.from({ length: 50 }, (_, i) => writer.append(payload(i + 1, i))));
    await writer.sync();
    await writer.close();
    const bytes = await readFile(path);
    let offset = 0;
    for (let i = 0; i < 50; i++) {
      expect(bytes.readUInt32LE(offset)).toBe(i + 1);
      expect(bytes[offset + 8]).toBe(i);
      offset += 8 + i + 1;
    }
    expect(offset).toBe(bytes.length);
  });

  it('truncates a torn tail when reopened and continues after the last valid frame', async () => {
    const path = join(dir, 'wal.bin');
    const good = encodeFrame(payload(30, 5));
    const torn = encodeFrame(payload(30, 6)).subarray(0, 17);
    await writeFile(path, Buffer.concat([good, torn]));
    const writer = await FrameWriter.open(path);
    expect(writer.length).toBe(good.length);
    expect((await stat(path)).size).toBe(good.length);
    await writer.append(payload(3, 7));
    await writer.sync();
    await writer.close();
    expect(completeFrames(await readFile(path))).toEqual({ length: good.length + 11, frames: 2 });
  });

  it('refuses calls after close', async () => {
    const writer = await FrameWriter.open(join(dir, 'wal.bin'));
    await writer.close();
    await expect(writer.append(payload(1, 1))).rejects.toSatisfy(FrameWriterError.isInstance);
    await writer.close();
  });

  it('refuses an empty payload without touching the file', async () => {
    const writer = await FrameWriter.open(join(dir, 'wal.bin'));
    expect(() => writer.append(new Uint8Array(0))).toThrow(RangeError);
    expect(writer.length).toBe(0);
    await writer.close();
  });
});

describe('readNewSegment', () => {
  async function framedFile(payloads: number[]): Promise<{ path: string; ends: number[] }> {
    const path = join(dir, 'wal.bin');
    const writer = await FrameWriter.open(path);
    const ends: number[] = [];
    for (const [i, length] of payloads.entries()) {
      await writer.append(payload(length, i + 1));
      ends.push(writer.length);
    }
    await writer.sync();
    await writer.close();
    return { path, ends };
  }

  it('returns the whole frames from the cursor up to the durable length', async () => {
    const { path, ends } = await framedFile([10, 20, 30]);
    const all = await readNewSegment(path, 0, ends[2]!);
    expect(all).toMatchObject({ start: 0, end: ends[2], frames: 3 });
    expect(Buffer.from(all!.bytes)).toEqual(await readFile(path));
    expect(all!.crc32).toBe(crc32(all!.bytes) >>> 0);
    // A durable length inside the third frame: the segment ends after the second.
    const partial = await readNewSegment(path, 0, ends[2]! - 1);
    expect(partial).toMatchObject({ start: 0, end: ends[1], frames: 2 });
    expect(partial!.bytes.length).toBe(ends[1]);
    expect(partial!.crc32).toBe(crc32(partial!.bytes) >>> 0);
    // From a cursor.
    const rest = await readNewSegment(path, ends[0]!, ends[2]!);
    expect(rest).toMatchObject({ start: ends[0], end: ends[2], frames: 2 });
  });

  it('returns null when nothing whole is new', async () => {
    const { path, ends } = await framedFile([10, 20]);
    expect(await readNewSegment(path, ends[1]!, ends[1]!)).toBeNull();
    expect(await readNewSegment(path, ends[0]!, ends[1]! - 1)).toBeNull();
    expect(await readNewSegment(path, ends[1]!, ends[1]! + 100)).toBeNull();
    expect(await readNewSegment(path, 5, 3)).toBeNull();
  });

  it('never returns bytes past the durable length, even when they are valid frames', async () => {
    const { path, ends } = await framedFile([10, 20, 30]);
    const segment = await readNewSegment(path, 0, ends[1]!);
    expect(segment!.end).toBe(ends[1]);
    expect(segment!.bytes.length).toBe(ends[1]);
  });

  it('ends at a corrupt frame, and the log ends there', async () => {
    const { path, ends } = await framedFile([10, 20, 30]);
    const bytes = await readFile(path);
    bytes[ends[0]! + 12] = bytes[ends[0]! + 12]! ^ 0xff;
    await writeFile(path, bytes);
    expect(await readNewSegment(path, 0, ends[2]!)).toMatchObject({ end: ends[0], frames: 1 });
    expect(await readNewSegment(path, ends[0]!, ends[2]!)).toBeNull();
  });

  it('with maxBytes, ends at the last whole frame within the cap but always reads one whole frame', async () => {
    const { path, ends } = await framedFile([10, 20, 30]);
    expect(await readNewSegment(path, 0, ends[2]!, { maxBytes: ends[1]! + 5 })).toMatchObject({
      end: ends[1],
      frames: 2,
    });
    expect(await readNewSegment(path, 0, ends[2]!, { maxBytes: 3 })).toMatchObject({
      end: ends[0],
      frames: 1,
    });
  });

  it('refuses bad offsets and honours an aborted signal', async () => {
    const { path, ends } = await framedFile([10]);
    await expect(readNewSegment(path, -1, 10)).rejects.toThrow(RangeError);
    await expect(readNewSegment(path, 0, 1.5)).rejects.toThrow(RangeError);
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await expect(readNewSegment(path, 0, ends[0]!, { signal: controller.signal })).rejects.toThrow(
      'stop',
    );
    await expect(readNewSegment(join(dir, 'missing'), 0, 10)).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});
