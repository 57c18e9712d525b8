/**
 * The bounded-memory case of `upload` (group `basics`): a store must stream
 * an upload, not hold the body whole before writing it. Observed without
 * timing: the source makes a fresh buffer per chunk and keeps only a `WeakRef`
 * to each; every few MiB, and when the store asks for the end of the body, it
 * forces a full garbage collection and counts the chunks still alive. A store
 * that collects the chunks before writing (the usual way to buffer) holds all
 * of them then. Not caught: a store that copies every chunk into a buffer of
 * its own. Rationale: docs/decisions/2026-12-05-runnable-examples-and-upload-memory.md.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ConformanceFailure, check } from './assertions.ts';
import { callOptions, key, MIB, patternChunks } from './case-helpers.ts';
import type { ConformanceCase } from './case-types.ts';

/** The most of an upload's source a store may hold at once: 8 MiB. */
export const UPLOAD_MEMORY_BOUND = 8 * MIB;
const BODY_BYTES = 3 * UPLOAD_MEMORY_BOUND;
const CHUNK_BYTES = 64 * 1024;
const CHECK_EVERY = 4 * MIB;
/** Parts the stores that upload in parts are asked for (S3's smallest). */
const PART_SIZE = 5 * MIB;

let forcedGc: (() => void) | undefined;

/** A full garbage collection, on demand: `gc` from `--expose-gc`, turned on now if needed. */
function collectGarbage(): void {
  if (!forcedGc) {
    const exposed = (globalThis as { gc?: unknown }).gc;
    if (typeof exposed === 'function') forcedGc = exposed as () => void;
    else {
      setFlagsFromString('--expose-gc');
      const created = runInNewContext('gc') as unknown;
      if (typeof created !== 'function')
        throw new ConformanceFailure('cannot force a garbage collection in this runtime');
      forcedGc = created as () => void;
    }
  }
  forcedGc();
}

function nextTask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export const uploadMemoryCases: ConformanceCase[] = [
  {
    group: 'basics',
    name: `upload streams: of a ${BODY_BYTES / MIB} MiB body given in ${CHUNK_BYTES / 1024} KiB chunks, no more than ${UPLOAD_MEMORY_BOUND / MIB} MiB of the chunks are still held at any check`,
    async run(context) {
      const chunks: { ref: WeakRef<ArrayBufferLike>; bytes: number }[] = [];
      let worst = { held: 0, pulled: 0 };
      let pulled = 0;
      const measure = async () => {
        // A new task first: WeakRefs made or read in this one keep their targets until it ends.
        await nextTask();
        collectGarbage();
        let held = 0;
        for (const chunk of chunks) if (chunk.ref.deref() !== undefined) held += chunk.bytes;
        if (held > worst.held) worst = { held, pulled };
      };
      async function* source(): AsyncGenerator<Uint8Array> {
        let nextCheck = UPLOAD_MEMORY_BOUND;
        for (const chunk of patternChunks(BODY_BYTES, CHUNK_BYTES, 36)) {
          chunks.push({ ref: new WeakRef(chunk.buffer), bytes: chunk.byteLength });
          pulled += chunk.byteLength;
          yield chunk;
          if (pulled >= nextCheck) {
            nextCheck += CHECK_EVERY;
            await measure();
          }
        }
        // The store asks past the last chunk: a store that buffers holds them all now.
        await measure();
      }
      const result = await context.store.upload(key(context, 'large'), source(), {
        ...callOptions(context),
        mode: 'overwrite',
        partSize: PART_SIZE,
      });
      check(
        worst.held <= UPLOAD_MEMORY_BOUND,
        `upload still held ${(worst.held / MIB).toFixed(1)} MiB of the chunks it was given after pulling ${(worst.pulled / MIB).toFixed(1)} MiB (bound ${UPLOAD_MEMORY_BOUND / MIB} MiB): it buffers the body instead of streaming it`,
      );
      check(pulled === BODY_BYTES, `upload pulled ${pulled} bytes of ${BODY_BYTES}`);
      check(
        result.size === BODY_BYTES,
        `upload reported size ${result.size}, expected ${BODY_BYTES}`,
      );
      const info = await context.store.head(key(context, 'large'), callOptions(context));
      check(info?.size === BODY_BYTES, `head reported size ${info?.size} after the upload`);
    },
  },
];
