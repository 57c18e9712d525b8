/**
 * The LEASE object: its key, its JSON, and a strict parser.
 *
 * A record that does not parse is never treated as absent (that would let a
 * damaged or hand-written object be overwritten as if the prefix were free):
 * {@link readLease} throws {@link LeaseRecordError}, and acquire refuses.
 */
import { randomBytes } from 'node:crypto';
import {
  type CallOptions,
  getCapped,
  isTooLarge,
  type ObjectStore,
  type ObjectVersion,
} from '@x/store';
import { LeaseOptionsError, LeaseRecordError } from './errors.ts';
import { refuseUnknownOptions } from './known-options.ts';
import type { LeaseRecord } from './lease-record.ts';

export type { LeaseRecord } from './lease-record.ts';

/** The longest TTL a record is trusted with (one hour); a longer one makes the record suspect. */
export const MAX_SANE_TTL_S = 3600;
/** The TTL used when none is given. */
export const DEFAULT_TTL_S = 30;
/** The shortest TTL accepted: renewals run every TTL/3, and retries wait at least one second. */
export const MIN_TTL_S = 3;
/** A lease record is a few hundred bytes; anything past this is not one. */
export const MAX_RECORD_BYTES = 64 * 1024;

/** `{prefix}/LEASE`. A trailing `/` on the prefix is ignored; an empty prefix is refused. */
export function leaseKey(prefix: string): string {
  return `${checkedPrefix(prefix)}/LEASE`;
}

/** @internal The prefix without one trailing `/`; `LeaseOptionsError` when empty. */
export function checkedPrefix(prefix: string): string {
  if (typeof prefix !== 'string' || prefix === '' || prefix === '/')
    throw new LeaseOptionsError('prefix', 'must be a non-empty key prefix such as "db/main"');
  return prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
}

/** A new random instance id: 16 random bytes as 32 lowercase hex digits. */
export function newInstanceId(): string {
  return randomBytes(16).toString('hex');
}

/** @internal A fresh nonce for one write. */
export function newNonce(): string {
  return randomBytes(12).toString('hex');
}

const FIELD_ORDER = [
  'instanceId',
  'acquiredAt',
  'renewedAt',
  'ttlSeconds',
  'generation',
  'term',
  'host',
  'pid',
  'nonce',
  'released',
] as const;

const KNOWN_FIELDS = new Set<string>(FIELD_ORDER);

/** The record as JSON bytes, fields in a stable order; optional fields only when set. */
export function serializeLeaseRecord(record: LeaseRecord): Uint8Array {
  const ordered: Record<string, unknown> = {};
  for (const field of FIELD_ORDER) {
    const value = record[field];
    if (value === undefined) continue;
    if (field === 'released' && value === false) continue;
    ordered[field] = value;
  }
  return new TextEncoder().encode(`${JSON.stringify(ordered)}\n`);
}

function hasControlCharacter(value: string): boolean {
  for (let index = 0; index < value.length; index++) {
    const code = value.charCodeAt(index);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** @internal Why `value` is not an acceptable instance id, or undefined. */
export function instanceIdProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length === 0) return 'must not be empty';
  if (value.length > 256) return 'must be at most 256 characters';
  if (hasControlCharacter(value)) return 'must not contain control characters';
  return undefined;
}

/**
 * Parses a LEASE object strictly: valid UTF-8 JSON, an object with exactly
 * the known fields, each of the right type and range.
 * @throws LeaseRecordError naming the first problem found.
 */
export function parseLeaseRecord(bytes: Uint8Array, key: string): LeaseRecord {
  if (bytes.byteLength > MAX_RECORD_BYTES)
    throw new LeaseRecordError(key, `${bytes.byteLength} bytes, more than ${MAX_RECORD_BYTES}`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new LeaseRecordError(key, 'not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new LeaseRecordError(key, `not JSON (${(error as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new LeaseRecordError(key, 'not a JSON object');
  const fields = value as Record<string, unknown>;
  for (const name of Object.keys(fields)) {
    if (!KNOWN_FIELDS.has(name))
      throw new LeaseRecordError(key, `unknown field ${JSON.stringify(name)}`);
  }
  const problem = (field: string, what: string): never => {
    throw new LeaseRecordError(key, `field "${field}" ${what}`);
  };
  const integer = (field: string, minimum: number, optional = false): number | undefined => {
    const raw = fields[field];
    if (raw === undefined) {
      if (optional) return undefined;
      return problem(field, 'is missing');
    }
    if (typeof raw !== 'number' || !Number.isSafeInteger(raw))
      return problem(field, `must be an integer, got ${JSON.stringify(raw)}`);
    if (raw < minimum) return problem(field, `must be >= ${minimum}, got ${raw}`);
    return raw;
  };

  const idProblem = instanceIdProblem(fields.instanceId);
  if (fields.instanceId === undefined) problem('instanceId', 'is missing');
  if (idProblem) problem('instanceId', idProblem);
  const acquiredAt = integer('acquiredAt', 0)!;
  const renewedAt = integer('renewedAt', 0)!;
  const ttlSeconds = integer('ttlSeconds', 1)!;
  const generation = integer('generation', 1)!;
  const term = integer('term', 0, true);
  if (typeof fields.host !== 'string')
    problem('host', fields.host === undefined ? 'is missing' : 'must be a string');
  const pid = integer('pid', 0)!;
  if (typeof fields.nonce !== 'string' || fields.nonce === '')
    problem('nonce', fields.nonce === undefined ? 'is missing' : 'must be a non-empty string');
  if (fields.released !== undefined && typeof fields.released !== 'boolean')
    problem('released', 'must be true or false');

  const record: {
    -readonly [K in keyof LeaseRecord]: LeaseRecord[K];
  } = {
    instanceId: fields.instanceId as string,
    acquiredAt,
    renewedAt,
    ttlSeconds,
    generation,
    host: fields.host as string,
    pid,
    nonce: fields.nonce as string,
  };
  if (term !== undefined) record.term = term;
  if (fields.released === true) record.released = true;
  return record;
}

/** A record together with the version of the object it was read from. */
export interface VersionedLeaseRecord {
  readonly record: LeaseRecord;
  readonly version: ObjectVersion;
}

/**
 * Reads `{prefix}/LEASE`.
 * @returns the record and its version (released records included: check
 *   `record.released`), or `null` when there is no object.
 * @throws LeaseRecordError when the object is not a valid record (never `null`);
 *   LeaseOptionsError for an empty prefix; StoreError from the store.
 */
export async function readLease(
  store: ObjectStore,
  prefix: string,
  options: CallOptions = {},
): Promise<VersionedLeaseRecord | null> {
  refuseUnknownOptions(options, ['signal'], 'readLease');
  const key = leaseKey(prefix);
  // Bucket contents are untrusted: never read more of the record than a valid one can hold.
  const found = await getCapped(store, key, MAX_RECORD_BYTES, options);
  if (!found) return null;
  if (isTooLarge(found)) {
    throw new LeaseRecordError(key, `${found.size} bytes or more, more than ${MAX_RECORD_BYTES}`);
  }
  return { record: parseLeaseRecord(found.body, key), version: found.version };
}
