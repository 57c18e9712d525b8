/**
 * The manifest entry of a side or chain file's bytes, uploaded unless the
 * bucket holds them already. In clear the key is the content's address
 * (`side/{name}/{crc32}-{size}`): the same bytes, the same key, so an upload
 * that finds it present compares CRCs. Sealed, the key names the stored
 * bytes' CRC-32 and size (`….bko`): a key naming the file's own CRC-32 would
 * let anyone who lists the bucket confirm a guess of its content, and every
 * sealing is new bytes. So a sealed file is found again by what this tenure
 * remembers (name and content, in memory only), or by opening the one the
 * newest restore point names under that name: reused when it holds these
 * bytes sealed to exactly this worker's recipients, so a restart does not
 * upload its side files again.
 */
import { crc32Hex, type FileEntry, parseSideKey, sideKey, sideObjectKey } from '@x/manifest';
import {
  decodeSegmentObject,
  encodeSegmentObjectAsync,
  SegmentObjectError,
  SegmentObjectKeyError,
} from '@x/wal-segment';
import type { WorkerContext } from './context.ts';

/** A side file's name and content, as this worker's memory tells them apart (never a key). */
export function sideContentOf(name: string, bytes: Uint8Array): string {
  return `${name}/${crc32Hex(bytes)}-${bytes.byteLength}`;
}

/**
 * What sealing adds to a file at most: the header (4 KiB at most), age's
 * stanzas (one per recipient) and 16 bytes per 64 KiB chunk, zstd's frame
 * and block headers. A stored object beyond it is not opened for reuse.
 */
function sealedSizeBound(bytes: number): number {
  return bytes + Math.ceil(bytes / 256) + 64 * 1024;
}

/** The entry of side file `name` holding `bytes`, stored as this worker stores side files. */
export async function sideFileEntry(
  ctx: WorkerContext,
  name: string,
  bytes: Uint8Array,
): Promise<FileEntry> {
  return ctx.keys.encrypts ? sealedSideEntry(ctx, name, bytes) : clearSideEntry(ctx, name, bytes);
}

async function clearSideEntry(
  ctx: WorkerContext,
  name: string,
  bytes: Uint8Array,
): Promise<FileEntry> {
  const crc32 = crc32Hex(bytes);
  const key = sideKey(ctx.prefix, name, crc32, bytes.byteLength);
  // Content-addressed: a key this tenure wrote (and retention has not
  // deleted since) already holds exactly these bytes.
  if (!ctx.tenure.sideKeysWritten.has(key)) {
    await ctx.requests.putImmutable(key, bytes, crc32);
    ctx.tenure.sideKeysWritten.add(key);
  }
  return { name, key, size: bytes.byteLength, crc32, frames: 0, lineage: ctx.tenure.ownLineage() };
}

async function sealedSideEntry(
  ctx: WorkerContext,
  name: string,
  bytes: Uint8Array,
): Promise<FileEntry> {
  const { tenure } = ctx;
  const content = sideContentOf(name, bytes);
  const known = tenure.sealedSide.get(content) ?? (await sealedInLatest(ctx, name, bytes));
  if (known !== undefined) {
    tenure.sealedSide.set(content, known);
    return known;
  }
  const lineage = tenure.ownLineage();
  const sealed = await encodeSegmentObjectAsync(
    bytes,
    {
      codec: 'zstd',
      kind: 'file',
      generation: 0,
      start: 0,
      end: bytes.byteLength,
      commits: 0,
      previousCrc32: 0,
      lineage,
    },
    { recipients: ctx.keys.recipients },
  );
  const crc32 = crc32Hex(sealed);
  const key = sideObjectKey(ctx.prefix, name, crc32, sealed.byteLength);
  // The key names these stored bytes: one already there with this CRC-32 is them.
  await ctx.requests.putImmutable(key, sealed, crc32);
  const entry = { name, key, size: sealed.byteLength, crc32, frames: 0, lineage };
  tenure.sealedSide.set(content, entry);
  return entry;
}

/**
 * The newest restore point's sealed entry for `name` when it opens, with
 * this worker's identities, to `bytes` sealed to exactly its recipients;
 * each such object is opened once per tenure. A store error propagates; an
 * object that does not open or disagrees is simply not reused.
 */
async function sealedInLatest(
  ctx: WorkerContext,
  name: string,
  bytes: Uint8Array,
): Promise<FileEntry | undefined> {
  const { tenure, keys } = ctx;
  const latest = tenure.latestManifest;
  if (latest === null || latest.lineage !== tenure.lineage) return undefined;
  for (const entry of latest.files) {
    if (entry.name !== name || tenure.sealedSideOpened.has(entry.key)) continue;
    if (parseSideKey(ctx.prefix, entry.key)?.layout !== 'object') continue;
    if (entry.size > sealedSizeBound(bytes.byteLength)) continue;
    tenure.sealedSideOpened.add(entry.key);
    const stored = await ctx.requests.getCapped(entry.key, entry.size);
    if (stored === null || stored === 'too-large') continue;
    if (stored.body.byteLength !== entry.size || crc32Hex(stored.body) !== entry.crc32) continue;
    let opened: ReturnType<typeof decodeSegmentObject>;
    try {
      opened = decodeSegmentObject(stored.body, { identities: keys.identities });
    } catch (error) {
      // Not openable by this worker (another run's tenure key, other
      // recipients) or not a valid object: uploaded again instead.
      if (SegmentObjectError.isInstance(error) || SegmentObjectKeyError.isInstance(error)) continue;
      throw error;
    }
    const { header, body } = opened;
    if (
      keys.disagreement(header.recipients, entry.key) === null &&
      header.kind === 'file' &&
      header.generation === 0 &&
      header.commits === 0 &&
      header.lineage === tenure.ownLineage() &&
      Buffer.from(body).equals(bytes)
    )
      return entry;
  }
  return undefined;
}
