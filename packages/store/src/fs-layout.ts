/**
 * `FsStore`'s on-disk layout (design: docs/decisions/2026-12-06-fs-store-locking.md): the
 * names it writes (`~obj`, `~lock`, `~tmp.`, `~stale.`, `~` escaped as
 * `~7e`), how a key maps to directories and a file name, and the 64-byte
 * header that carries each object file's version. Also the context every
 * part of the store shares (root, fsync, stale-lock age, host).
 */
import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { InvalidKeyError, StoreError } from './errors.ts';
import { validateKey } from './keys.ts';
import type { ObjectVersion } from './object-store.ts';

/** What every part of one `FsStore` needs to know about it. */
export interface FsContext {
  /** The absolute root directory. */
  readonly root: string;
  readonly fsync: boolean;
  readonly staleLockMs: number;
  /** This machine's host name (lock records name it). */
  readonly host: string;
}

export const OBJECT_SUFFIX = '~obj';
export const LOCK_SUFFIX = '~lock';
export const TEMP_PREFIX = '~tmp.';
export const STALE_PREFIX = '~stale.';
/** Longest encoded segment: 255 (NAME_MAX) minus the longest suffix we append. */
export const MAX_SEGMENT_BYTES = 255 - LOCK_SUFFIX.length;

export const HEADER_BYTES = 64;
export const MAGIC = 'xstore-object/1 ';
export const VERSION_HEX_LENGTH = 32;
export const READ_CHUNK_BYTES = 1024 * 1024;
export const LIST_READ_CONCURRENCY = 32;
/** Bounded retries when a directory vanishes under us (removed by a concurrent tidy). */
export const DIRECTORY_RETRIES = 50;

/** A directory name we wrote: segments with `~` escaped and no other `~`. */
export const DIRECTORY_NAME = /^(?:[^~]|~7e)+$/;
export const OBJECT_NAME = /^((?:[^~]|~7e)+)~obj$/;

export function encodeSegment(segment: string): string {
  return segment.replaceAll('~', '~7e');
}

export function decodeSegment(name: string): string {
  return name.replaceAll('~7e', '~');
}

export function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String((error as { code: unknown }).code)
    : undefined;
}

export function newVersionId(): string {
  return randomBytes(VERSION_HEX_LENGTH / 2).toString('hex');
}

export function encodeHeader(versionId: string): Buffer {
  const text = `${MAGIC}${versionId}`;
  return Buffer.from(`${text.padEnd(HEADER_BYTES - 1, ' ')}\n`, 'latin1');
}

export function versionOf(versionId: string): ObjectVersion {
  return { etag: `"${versionId}"` };
}

export interface KeyPath {
  readonly key: string;
  /** Encoded directory names from the root down. */
  readonly directories: readonly string[];
  /** Encoded last segment (without suffix). */
  readonly name: string;
}

export function keyPathOf(key: string): KeyPath {
  validateKey(key);
  const encoded = key.split('/').map(encodeSegment);
  for (const segment of encoded) {
    if (Buffer.byteLength(segment, 'utf8') > MAX_SEGMENT_BYTES)
      throw new InvalidKeyError(
        key,
        `a path segment longer than ${MAX_SEGMENT_BYTES} bytes cannot be stored by FsStore`,
      );
  }
  return { key, directories: encoded.slice(0, -1), name: encoded.at(-1)! };
}

export async function readHeader(handle: FileHandle, path: string, key: string): Promise<string> {
  const header = Buffer.alloc(HEADER_BYTES);
  const { bytesRead } = await handle.read(header, 0, HEADER_BYTES, 0);
  const text = header.toString('latin1', 0, bytesRead);
  const versionId = text.slice(MAGIC.length, MAGIC.length + VERSION_HEX_LENGTH);
  if (
    bytesRead !== HEADER_BYTES ||
    !text.startsWith(MAGIC) ||
    !/^[0-9a-f]{32}$/.test(versionId) ||
    !text.endsWith('\n')
  )
    throw new StoreError(`not an FsStore object file (bad header): ${path}`, { key });
  return versionId;
}
