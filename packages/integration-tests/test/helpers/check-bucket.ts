/**
 * Checks of a bucket prefix straight from the objects, independent of the
 * worker: every manifest verifies (parses, one lineage, every object present
 * with its size and CRC), `LATEST` names one of them, and a restore point's
 * content is the source's at its commit (see `framed-engine.ts`).
 */
import type { AgeIdentity } from '@x/age-envelope';
import {
  crc32Hex,
  latestKey,
  type Manifest,
  parseArchiveKey,
  parseArchiveName,
  parseLatest,
  parseManifest,
  parseSegmentKey,
  parseSnapshotKey,
  verifyLineage,
} from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { decodeSegmentObject } from '@x/wal-segment';

export interface BucketCheck {
  manifests: Map<string, Manifest>;
  latest: string | null;
}

/** The payloads of a framed log, text up to its first NUL; throws on a torn frame, naming `what`. */
export function framePayloads(bytes: Uint8Array, what: string): string[] {
  const payloads: string[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 0;
  while (offset < bytes.byteLength) {
    if (offset + 8 > bytes.byteLength) throw new Error(`${what}: torn frame header at ${offset}`);
    const length = view.getUint32(offset, true);
    if (offset + 8 + length > bytes.byteLength) throw new Error(`${what}: torn frame at ${offset}`);
    const payload = bytes.subarray(offset + 8, offset + 8 + length);
    const end = payload.indexOf(0);
    payloads.push(new TextDecoder().decode(end === -1 ? payload : payload.subarray(0, end)));
    offset += 8 + length;
  }
  return payloads;
}

/** Every object the manifest names exists with its size and CRC; returns the bodies by key. */
export async function verifyManifestObjects(
  store: ObjectStore,
  manifest: Manifest,
): Promise<Map<string, Uint8Array>> {
  const bodies = new Map<string, Uint8Array>();
  for (const entry of [...manifest.files, ...manifest.segments]) {
    const object = await store.get(entry.key);
    if (object === null) throw new Error(`${entry.key} is missing`);
    if (object.body.byteLength !== entry.size)
      throw new Error(`${entry.key}: size ${object.body.byteLength}, manifest says ${entry.size}`);
    if (crc32Hex(object.body) !== entry.crc32) throw new Error(`${entry.key}: CRC mismatch`);
    bodies.set(entry.key, object.body);
  }
  return bodies;
}

/** What a check needs to open sealed objects; none: every object must be in clear. */
export interface OpenOptions {
  readonly identities?: readonly AgeIdentity[];
}

/**
 * The restore point's content equals the test engine's state at its commit:
 * frames `commit-{floor+1}` … `commit-{commitSeq}` in order (archives, then
 * the segments, contiguous from offset 0 in the manifest's generation), and
 * the snapshot text for the commits before the WAL.
 */
export async function checkRestorePointContent(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  open: OpenOptions = {},
): Promise<void> {
  const bodies = await verifyManifestObjects(store, manifest);
  const archives = manifest.files
    .filter((f) => parseArchiveName(f.name) !== undefined)
    .sort((a, b) => parseArchiveName(a.name)! - parseArchiveName(b.name)!);
  const payloads: string[] = [];
  for (const archive of archives) {
    const stored = bodies.get(archive.key)!;
    // A `.archive.bko` object: the archive is its decoded body.
    const bytes =
      parseArchiveKey(prefix, archive.key)?.layout === 'object'
        ? decodeSegmentObject(stored, open).body
        : stored;
    payloads.push(...framePayloads(bytes, archive.key));
  }
  const beforeWal = manifest.oldestCommitSeq + payloads.length;
  const snapshot = manifest.files.find((f) => f.name === 'snapshot.bin');
  if (snapshot) {
    const stored = bodies.get(snapshot.key)!;
    // A `.snap` object: the snapshot is its decoded body.
    const image =
      parseSnapshotKey(prefix, snapshot.key)?.layout === 'object'
        ? decodeSegmentObject(stored, open).body
        : stored;
    const text = new TextDecoder().decode(image);
    if (text !== `snapshot-at-${beforeWal}`)
      throw new Error(`snapshot holds ${text}, expected snapshot-at-${beforeWal}`);
  }
  let cursor = 0;
  for (const segment of manifest.segments) {
    const parsed = parseSegmentKey(prefix, segment.key);
    if (!parsed) throw new Error(`${segment.key} is not a segment key`);
    if (parsed.generation !== manifest.walGeneration)
      throw new Error(`${segment.key} is not of generation ${manifest.walGeneration}`);
    if (parsed.start !== cursor) throw new Error(`${segment.key} does not start at ${cursor}`);
    cursor = parsed.end;
    let body = bodies.get(segment.key)!;
    if (parsed.layout === 'object') {
      // A `.seg` object: its frames are the decoded body, for exactly the key's range.
      const decoded = decodeSegmentObject(body, open);
      if (decoded.header.start !== parsed.start || decoded.header.end !== parsed.end)
        throw new Error(
          `${segment.key}: header range ${decoded.header.start}-${decoded.header.end}`,
        );
      if (decoded.header.commits !== segment.frames)
        throw new Error(`${segment.key}: header says ${decoded.header.commits} commits`);
      body = decoded.body;
    }
    payloads.push(...framePayloads(body, segment.key));
  }
  const expected = Array.from(
    { length: manifest.commitSeq - manifest.oldestCommitSeq },
    (_, i) => `commit-${manifest.oldestCommitSeq + 1 + i}`,
  );
  if (JSON.stringify(payloads) !== JSON.stringify(expected))
    throw new Error(
      `restore point ${manifest.commitSeq}: frames ${payloads.slice(0, 3).join(',')}… (${payloads.length}), expected ${expected.length} from commit-${manifest.oldestCommitSeq + 1}`,
    );
}

/**
 * Every manifest under the prefix parses, names one lineage throughout, and
 * names only objects that exist with the right size and CRC; `LATEST`, when
 * present, names one of them. With `content`, every restore point's content
 * is also checked against the test engine's.
 */
export async function checkBucket(
  store: ObjectStore,
  prefix: string,
  options: { content?: boolean } & OpenOptions = {},
): Promise<BucketCheck> {
  const listed = await store.list(`${prefix}/manifest/`);
  const manifests = new Map<string, Manifest>();
  for (const object of listed.objects) {
    const body = await store.get(object.key);
    if (body === null) throw new Error(`${object.key} vanished`);
    const manifest = parseManifest(body.body, { prefix });
    verifyLineage(manifest);
    if (options.content) await checkRestorePointContent(store, prefix, manifest, options);
    else await verifyManifestObjects(store, manifest);
    manifests.set(object.key, manifest);
  }
  const latest = await store.get(latestKey(prefix));
  let target: string | null = null;
  if (latest !== null) {
    target = parseLatest(latest.body, { prefix });
    if (!manifests.has(target))
      throw new Error(`LATEST names ${target}, which is not a manifest that verifies`);
  }
  return { manifests, latest: target };
}
