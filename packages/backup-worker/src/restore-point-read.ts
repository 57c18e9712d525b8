/**
 * A restore point read back from the bucket, for a restart with no record of
 * its own to prove its state with (generation-continuation.ts): the snapshot's
 * image, streamed, then each log object's body, each checked as a restore
 * checks it before a byte is handed on. The snapshot: stored size and CRC-32
 * as it streams (a mismatch throws before the iteration completes), and for a
 * `.snap` the envelope, its kind and generation; log objects:
 * log-object-read.ts. Failures are {@link RestorePointReadError}s naming the
 * key. Memory: one log object, and the snapshot's stream buffers. Reads only.
 */
import type { RestorePointContent } from '@x/engine';
import { Crc32, type Manifest, parseSnapshotKey } from '@x/manifest';
import { decodeSegmentObjectStream } from '@x/wal-segment';
import type { WorkerContext } from './context.ts';
import { BackupError, messageOf, RestorePointReadError } from './errors.ts';
import { readCheckedLogObject } from './log-object-read.ts';

/** The content of `manifest` (a snapshot and log objects of its generation), read on demand. */
export function restorePointContent(
  ctx: WorkerContext,
  manifest: Manifest,
): RestorePointContent & { readonly bytesRead: () => number } {
  const { requests, prefix } = ctx;
  let bytesRead = 0;
  const fail = (key: string, problem: string) => new RestorePointReadError(key, problem);
  return {
    bytesRead: () => bytesRead,
    async *image() {
      const entry = manifest.files[0];
      const parsed = entry === undefined ? undefined : parseSnapshotKey(prefix, entry.key);
      if (entry === undefined || parsed === undefined)
        throw fail(entry?.key ?? prefix, 'the restore point names no snapshot');
      async function* stored(): AsyncGenerator<Uint8Array> {
        const crc = new Crc32();
        let size = 0;
        for await (const chunk of requests.getStream(entry!.key, () =>
          fail(entry!.key, 'missing from the bucket'),
        )) {
          size += chunk.byteLength;
          bytesRead += chunk.byteLength;
          if (size > entry!.size)
            throw fail(entry!.key, `holds more than its entry's ${entry!.size} bytes`);
          crc.update(chunk);
          yield chunk;
        }
        if (size !== entry!.size || crc.hex() !== entry!.crc32)
          throw fail(
            entry!.key,
            `holds ${size} bytes of CRC-32 ${crc.hex()}, its entry says ${entry!.size} of ${entry!.crc32}`,
          );
      }
      if (parsed.layout !== 'object') {
        yield* stored();
        return;
      }
      try {
        const decoded = await decodeSegmentObjectStream(stored());
        if (decoded.header.kind !== 'snapshot' || decoded.header.generation !== parsed.generation)
          throw fail(
            entry.key,
            `its header says a ${decoded.header.kind} of generation ${decoded.header.generation}`,
          );
        yield* decoded.body;
      } catch (error) {
        if (BackupError.isInstance(error)) throw error;
        throw fail(entry.key, messageOf(error));
      }
    },
    async *logBodies() {
      for (const entry of manifest.segments) {
        const { body } = await readCheckedLogObject({
          requests,
          prefix,
          generation: manifest.walGeneration,
          entry,
          fail,
        });
        bytesRead += entry.size;
        yield body;
      }
    },
  };
}
