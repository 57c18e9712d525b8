/**
 * Archives of an encrypted backup (`archives/{g}/wal.{n}.archive.bko`, a
 * whole file in the envelope, kind file): what the local archive holds, read
 * once, and whether a sealed archive the bucket holds is that archive. Its
 * stored bytes say nothing of the content (every sealing is new bytes), so
 * the bucket's copy is opened and its decoded bytes compared, once per
 * archive per tenure, instead of uploading it again; only a copy sealed to
 * exactly this worker's recipients is reused.
 */
import type { FrameCounting, OpenedArchive } from '@x/engine';
import { Crc32, type FileEntry, parseArchiveKey } from '@x/manifest';
import {
  decodeSegmentObjectStream,
  SegmentObjectError,
  SegmentObjectKeyError,
} from '@x/wal-segment';
import type { WorkerContext } from './context.ts';

/** The local archive's length, CRC-32 (8 hex) and frames. */
export interface ArchiveContent {
  readonly length: number;
  readonly crc32: string;
  readonly frames: number;
}

/** Reads `archive` once, counting its frames with `counter`. */
export async function archiveContent(
  archive: OpenedArchive,
  counter: FrameCounting,
  signal: AbortSignal,
): Promise<ArchiveContent> {
  const crc = new Crc32();
  let length = 0;
  for await (const chunk of archive.read({ signal })) {
    crc.update(chunk);
    counter.push(chunk);
    length += chunk.byteLength;
  }
  return { length, crc32: crc.hex(), frames: counter.frames };
}

/** The sealed archive is not in the bucket (any more). */
class StoredArchiveMissing extends Error {}

/**
 * Whether the sealed archive of `entry` opens, with this worker's
 * identities, to `local`'s bytes, with a header that agrees with its key
 * and entry and exactly this worker's recipients. Store errors propagate.
 */
export async function sealedArchiveHolds(
  ctx: WorkerContext,
  entry: FileEntry,
  local: ArchiveContent,
): Promise<boolean> {
  const parsed = parseArchiveKey(ctx.prefix, entry.key);
  if (parsed?.layout !== 'object') return false;
  const stored = ctx.requests.getStream(entry.key, () => new StoredArchiveMissing());
  try {
    const { header, body } = await decodeSegmentObjectStream(stored, {
      identities: ctx.keys.identities,
    });
    if (
      ctx.keys.disagreement(header.recipients, entry.key) !== null ||
      header.kind !== 'file' ||
      header.generation !== parsed.generation ||
      header.commits !== entry.frames ||
      header.lineage !== entry.lineage ||
      header.decodedLength !== local.length
    )
      return false;
    const crc = new Crc32();
    // The decoder checks the length and the CRC-32 its binding states.
    for await (const chunk of body) crc.update(chunk);
    return crc.hex() === local.crc32;
  } catch (error) {
    if (
      error instanceof StoredArchiveMissing ||
      SegmentObjectError.isInstance(error) ||
      SegmentObjectKeyError.isInstance(error)
    )
      return false;
    throw error;
  } finally {
    // Ends the GET when the body was not read to its end.
    await stored.return(undefined);
  }
}
