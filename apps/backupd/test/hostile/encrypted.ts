/**
 * SQLite baselines for the hostile table of encrypted objects, and the ways
 * to forge or damage an encrypted object in a copy of one.
 *
 * A baseline is a small WAL database whose rows are incompressible blobs
 * (so its snapshot's stored body spans several 64 KiB age chunks), backed up
 * in a few steps to an `FsStore` root: one snapshot and several `.seg`
 * segments, each step a restore point, LATEST naming the newest. The
 * encrypted one is encrypted to the test key only; the clear one is not
 * encrypted. Layout of a baseline directory, and of each case copied from it:
 *
 * ```
 * <root>/store/        FsStore root (`file://<root>/store`), prefix `backup`
 * <root>/db/app.db     the database backed up (baselines only; cases copy the store)
 * <root>/restore/      missing: restore's target (`<root>/restore/app.db`) goes there
 * ```
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  type AgeIdentity,
  type AgeRecipient,
  generateIdentity,
  parseIdentity,
  parseRecipient,
} from '@x/age-envelope';
import { BackupWorker } from '@x/backup-worker';
import { FakeClock } from '@x/lease';
import {
  crc32Hex,
  type Manifest,
  parseManifestKey,
  parseSegmentKey,
  parseSnapshotKey,
} from '@x/manifest';
import { SqliteSource } from '@x/source-sqlite';
import { FsStore, type ObjectStore } from '@x/store';
import {
  decodeSegmentObject,
  encodeSegmentObject,
  readSegmentObjectHeader,
  segmentObjectFieldsOf,
} from '@x/wal-segment';
import { copyCase, latestManifest, NOW_MS, PREFIX } from './bucket.ts';

/** One age key pair: the identity (secret), its recipient, and an identity file holding it. */
export interface TestKey {
  readonly recipient: AgeRecipient;
  readonly identity: AgeIdentity;
  /** The secret key's text, to make sure no output shows it. */
  readonly secret: string;
  /** An identity file as `age-keygen` writes it (`# created`, `# public key`, the key). */
  readonly file: string;
}

/** A new key pair, its identity file written at `file`. */
export async function makeTestKey(file: string): Promise<TestKey> {
  const { identity, recipient } = generateIdentity();
  await writeFile(
    file,
    `# created: ${new Date(NOW_MS).toISOString()}\n# public key: ${recipient}\n${identity}\n`,
    { mode: 0o600 },
  );
  return {
    recipient: parseRecipient(recipient),
    identity: parseIdentity(identity, file),
    secret: identity,
    file,
  };
}

export interface CasePaths {
  readonly root: string;
  readonly storeRoot: string;
  readonly storeUrl: string;
  readonly database: string;
  /** Where restore may create its target; missing before a restore. */
  readonly restoreParent: string;
  readonly target: string;
}

export function casePaths(root: string): CasePaths {
  const storeRoot = join(root, 'store');
  return {
    root,
    storeRoot,
    storeUrl: `file://${storeRoot}`,
    database: join(root, 'db', 'app.db'),
    restoreParent: join(root, 'restore'),
    target: join(root, 'restore', 'app.db'),
  };
}

export function openStore(paths: CasePaths): FsStore {
  return new FsStore({ root: paths.storeRoot, fsync: false });
}

/** Rows of the baseline database: 1000 random bytes each, about 240 KiB in all. */
const ROWS = 240;
const ROW_BYTES = 1000;
/** Commits after the first backup step, each followed by a step of its own (one `.seg` each). */
const LATER_COMMITS = 3;
/** The newest restore point's commit; it names the snapshot and this many segments. */
export const NEWEST_COMMIT = LATER_COMMITS;

function createDatabase(path: string): DatabaseSync {
  const database = new DatabaseSync(path);
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)');
  const insert = database.prepare('INSERT INTO blobs (body) VALUES (?)');
  database.exec('BEGIN');
  for (let row = 0; row < ROWS; row += 1) insert.run(randomBytes(ROW_BYTES));
  database.exec('COMMIT');
  return database;
}

function commitChange(database: DatabaseSync, step: number): void {
  database
    .prepare('UPDATE blobs SET body = ? WHERE id = ?')
    .run(randomBytes(ROW_BYTES), 1 + ((step * 37) % ROWS));
}

/**
 * Builds a baseline in `root` (see the module comment): encrypted to
 * `recipients` (the worker holding `identities`, so no key of its own is
 * added), or in clear when `recipients` is empty.
 */
export async function buildSqliteBaseline(
  root: string,
  encryption: { recipients: readonly AgeRecipient[]; identities: readonly AgeIdentity[] },
): Promise<void> {
  const paths = casePaths(root);
  await mkdir(join(root, 'db'), { recursive: true });
  const database = createDatabase(paths.database);
  const source = SqliteSource.open({ path: paths.database, captureIntervalMs: 0 });
  const worker = new BackupWorker({
    store: openStore(paths),
    prefix: PREFIX,
    source,
    clock: new FakeClock({ wallMs: NOW_MS }),
    manifestIntervalMs: 0,
    ...(encryption.recipients.length === 0 ? {} : { encryption }),
  });
  try {
    await worker.runOnce();
    for (let step = 1; step <= LATER_COMMITS; step += 1) {
      commitChange(database, step);
      await worker.runOnce();
    }
    await worker.flush();
  } finally {
    await source.close();
    database.close();
  }
}

/** A fresh case at `to`: a copy of the baseline's store (the database stays in the baseline). */
export async function copyBaselineStore(baseline: string, to: string): Promise<CasePaths> {
  const paths = casePaths(to);
  await mkdir(to);
  await copyCase(casePaths(baseline).storeRoot, paths.storeRoot);
  return paths;
}

// ── What the baseline holds ──────────────────────────────────────────────────

/** The newest restore point's snapshot and segments, in chain order. */
export interface NewestObjects {
  readonly manifestKey: string;
  readonly manifest: Manifest;
  readonly snapshot: string;
  readonly segments: readonly string[];
}

export async function newestObjects(store: ObjectStore): Promise<NewestObjects> {
  const { key, manifest } = await latestManifest(store);
  const snapshot = manifest.files.find(
    (file) => parseSnapshotKey(PREFIX, file.key)?.layout === 'object',
  )?.key;
  if (snapshot === undefined) throw new Error(`${key} names no .snap snapshot`);
  const segments = manifest.segments
    .map((segment) => segment.key)
    .filter((segmentKey) => parseSegmentKey(PREFIX, segmentKey)?.layout === 'object');
  return { manifestKey: key, manifest, snapshot, segments };
}

export async function storedBytes(store: ObjectStore, key: string): Promise<Uint8Array> {
  const object = await store.get(key);
  if (object === null) throw new Error(`${key} is missing`);
  return Uint8Array.from(object.body);
}

// ── Planting ─────────────────────────────────────────────────────────────────

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface ManifestJson {
  files: { key: string; size: number; crc32: string }[];
  segments: { key: string; size: number; crc32: string }[];
}

/**
 * Stores `bytes` at `key` and rewrites every manifest entry naming `key`
 * with their size and CRC-32: the object passes the download checks and
 * reaches the decoder.
 */
export async function plantObject(
  store: ObjectStore,
  key: string,
  bytes: Uint8Array,
): Promise<void> {
  await store.put(key, bytes);
  let rewritten = 0;
  for (const { key: listed } of (await store.list(`${PREFIX}/manifest/`)).objects) {
    if (parseManifestKey(PREFIX, listed) === undefined) continue;
    const json = JSON.parse(decoder.decode(await storedBytes(store, listed))) as ManifestJson;
    const entries = [...json.files, ...json.segments].filter((entry) => entry.key === key);
    if (entries.length === 0) continue;
    for (const entry of entries) {
      entry.size = bytes.byteLength;
      entry.crc32 = crc32Hex(bytes);
    }
    await store.put(listed, encoder.encode(JSON.stringify(json, null, 2)));
    rewritten += 1;
  }
  if (rewritten === 0) throw new Error(`no manifest names ${key}`);
}

/** The object `stored` encoded again with the same header fields, to `recipients` (none: in clear). */
export function reencoded(
  stored: Uint8Array,
  identities: readonly AgeIdentity[],
  recipients: readonly AgeRecipient[],
): Uint8Array {
  const { header, body } = decodeSegmentObject(stored, { identities });
  return encodeSegmentObject(body, segmentObjectFieldsOf(header), { recipients });
}

// ── The age file inside an encrypted object ──────────────────────────────────

/** age's payload chunk: 64 KiB of plaintext, sealed with a 16-byte tag. */
export const AGE_CHUNK_BYTES = 64 * 1024;
export const AGE_SEALED_CHUNK_BYTES = AGE_CHUNK_BYTES + 16;
const AGE_NONCE_BYTES = 16;

/** Offsets in a stored encrypted object: where its age file, that file's MAC and its payload start. */
export interface AgeLayout {
  /** The age file's first byte (the envelope header's length). */
  readonly ageStart: number;
  /** The first character of the `--- ` line's MAC. */
  readonly macStart: number;
  /** The first byte of the first sealed chunk (after the header and the nonce). */
  readonly payloadStart: number;
  /** Sealed chunks in the payload. */
  readonly chunks: number;
}

export function ageLayout(stored: Uint8Array): AgeLayout {
  const ageStart = readSegmentObjectHeader(stored).headerBytes;
  const text = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength).toString('latin1');
  const macLine = text.indexOf('\n--- ', ageStart);
  if (macLine < 0) throw new Error('no age header MAC line');
  const macStart = macLine + '\n--- '.length;
  const headerEnd = text.indexOf('\n', macStart) + 1;
  const payloadStart = headerEnd + AGE_NONCE_BYTES;
  const chunks = Math.ceil((stored.byteLength - payloadStart) / AGE_SEALED_CHUNK_BYTES);
  return { ageStart, macStart, payloadStart, chunks };
}

// ── Forgeries of stored bytes ────────────────────────────────────────────────

/** `stored`'s envelope header around `donor`'s encrypted body (its age file). */
export function headerOnBodyOf(stored: Uint8Array, donor: Uint8Array): Uint8Array {
  const header = stored.subarray(0, readSegmentObjectHeader(stored).headerBytes);
  const body = donor.subarray(readSegmentObjectHeader(donor).headerBytes);
  return new Uint8Array(Buffer.concat([header, body]));
}

/** `stored` with the byte at `at` flipped (every bit). */
export function flippedAt(stored: Uint8Array, at: number): Uint8Array {
  const copy = Uint8Array.from(stored);
  copy[at] = copy[at]! ^ 0xff;
  return copy;
}

/** `stored` with the first character of its age header's MAC replaced by another base64 one. */
export function macAltered(stored: Uint8Array): Uint8Array {
  const { macStart } = ageLayout(stored);
  const copy = Uint8Array.from(stored);
  const A = 'A'.charCodeAt(0);
  copy[macStart] = copy[macStart] === A ? A + 1 : A;
  return copy;
}
