/**
 * Frame counting and CRC-32 over a 1 GiB framed log of 64 KiB frames, read
 * from disk in 4 MiB chunks into one reused buffer (the page cache is warm:
 * the file was just written). Three passes per run: reading alone; reading +
 * FrameCounter, whose `crc32` is the whole file's CRC from the same pass (each
 * frame's CRC combined in); reading + FrameCounter + a separate whole-file
 * Crc32 over every chunk (two CRC passes over each byte), for comparison.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Crc32 } from '@x/manifest';
import { FrameCounter, FrameWriter } from '@x/wal-segment';
import { defineBenchmark, type Measurement, megabytesPerSecond } from './harness.ts';

const PAYLOAD_BYTES = 64 * 1024;
const FRAMES = 16 * 1024; // 16384 × 64 KiB = 1 GiB of payload
const CHUNK_BYTES = 4 * 1024 * 1024;

interface State {
  path: string;
  size: number;
  buffer: Buffer;
}

async function pass(
  state: State,
  consume: (chunk: Uint8Array) => void,
): Promise<{ elapsed: bigint; bytes: number }> {
  const handle = await open(state.path, 'r');
  try {
    const started = process.hrtime.bigint();
    let position = 0;
    for (;;) {
      const { bytesRead } = await handle.read(state.buffer, 0, CHUNK_BYTES, position);
      if (bytesRead === 0) break;
      consume(state.buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    return { elapsed: process.hrtime.bigint() - started, bytes: position };
  } finally {
    await handle.close();
  }
}

export const benchmark = defineBenchmark<State>({
  name: 'framed-log',
  description:
    'FrameCounter and CRC-32 over a 1 GiB framed log of 64 KiB frames, streamed from disk',
  async setup(context) {
    const path = join(context.tempDir, 'wal.bin');
    const writer = await FrameWriter.open(path);
    const payload = new Uint8Array(PAYLOAD_BYTES);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 2654435761) >>> 24;
    context.log(`writing ${FRAMES} frames of ${PAYLOAD_BYTES} bytes`);
    for (let frame = 0; frame < FRAMES; frame++) {
      new DataView(payload.buffer).setUint32(0, frame, true); // every frame differs
      await writer.append(payload);
    }
    await writer.sync();
    const size = writer.length;
    await writer.close();
    return { path, size, buffer: Buffer.allocUnsafe(CHUNK_BYTES) };
  },
  async run(state) {
    const read = await pass(state, () => {});
    const counter = new FrameCounter();
    const onePass = await pass(state, (chunk) => counter.push(chunk));
    const both = new FrameCounter();
    const crc = new Crc32();
    const twoPasses = await pass(state, (chunk) => {
      both.push(chunk);
      crc.update(chunk);
    });
    for (const c of [counter, both]) {
      if (c.frames !== FRAMES || c.completeLength !== state.size) {
        throw new Error(
          `counted ${c.frames} frames / ${c.completeLength} bytes, expected ${FRAMES}`,
        );
      }
    }
    if (counter.crc32 !== crc.digest()) throw new Error('the one-pass file CRC differs');
    const results: Record<string, Measurement> = {
      'read only': megabytesPerSecond(read.bytes, read.elapsed),
      'count + file CRC, one pass': megabytesPerSecond(onePass.bytes, onePass.elapsed),
      'count + file CRC, two passes': megabytesPerSecond(twoPasses.bytes, twoPasses.elapsed),
    };
    return results;
  },
});
