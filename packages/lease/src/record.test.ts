import { describe, expect, it } from 'vitest';
import { LeaseOptionsError, LeaseRecordError } from './errors.ts';
import {
  type LeaseRecord,
  leaseKey,
  MAX_RECORD_BYTES,
  newInstanceId,
  parseLeaseRecord,
  serializeLeaseRecord,
} from './record.ts';

const KEY = 'db/LEASE';
const valid: LeaseRecord = {
  instanceId: 'a'.repeat(32),
  acquiredAt: 1_700_000_000_000,
  renewedAt: 1_700_000_010_000,
  ttlSeconds: 30,
  generation: 3,
  host: 'db-1',
  pid: 123,
  nonce: 'n1',
};

function text(value: unknown): Uint8Array {
  return new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
}

function problemOf(bytes: Uint8Array): string {
  try {
    parseLeaseRecord(bytes, KEY);
  } catch (error) {
    expect(LeaseRecordError.isInstance(error)).toBe(true);
    expect((error as LeaseRecordError).key).toBe(KEY);
    return (error as LeaseRecordError).problem;
  }
  throw new Error('expected a LeaseRecordError');
}

describe('lease record', () => {
  it('leaseKey appends /LEASE, ignores one trailing slash, refuses an empty prefix', () => {
    expect(leaseKey('db/main')).toBe('db/main/LEASE');
    expect(leaseKey('db/main/')).toBe('db/main/LEASE');
    expect(() => leaseKey('')).toThrow(LeaseOptionsError);
  });

  it('newInstanceId is 32 lowercase hex digits and unique', () => {
    const ids = new Set(Array.from({ length: 100 }, () => newInstanceId()));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
  });

  it('round-trips, with optional fields only when set', () => {
    const withTerm: LeaseRecord = { ...valid, term: 4, released: true };
    expect(parseLeaseRecord(serializeLeaseRecord(valid), KEY)).toEqual(valid);
    expect(parseLeaseRecord(serializeLeaseRecord(withTerm), KEY)).toEqual(withTerm);
    expect(new TextDecoder().decode(serializeLeaseRecord(valid))).not.toMatch(/term|released/);
  });

  it('names the problem of each invalid record', () => {
    expect(problemOf(text('not json'))).toMatch(/not JSON/);
    expect(problemOf(new Uint8Array([0xff, 0xfe]))).toMatch(/UTF-8/);
    expect(problemOf(text([1]))).toMatch(/not a JSON object/);
    expect(problemOf(text('null'))).toMatch(/not a JSON object/);
    expect(problemOf(text({ ...valid, extra: 1 }))).toMatch(/unknown field "extra"/);
    const { generation: _generation, ...noGeneration } = valid;
    expect(problemOf(text(noGeneration))).toMatch(/"generation" is missing/);
    expect(problemOf(text({ ...valid, generation: 0 }))).toMatch(/"generation" must be >= 1/);
    expect(problemOf(text({ ...valid, generation: 1.5 }))).toMatch(
      /"generation" must be an integer/,
    );
    expect(problemOf(text({ ...valid, renewedAt: '2026-01-01' }))).toMatch(/"renewedAt"/);
    expect(problemOf(text({ ...valid, ttlSeconds: 0 }))).toMatch(/"ttlSeconds"/);
    expect(problemOf(text({ ...valid, instanceId: '' }))).toMatch(/"instanceId" must not be empty/);
    expect(problemOf(text({ ...valid, instanceId: 'a\nb' }))).toMatch(/control/);
    expect(problemOf(text({ ...valid, host: 5 }))).toMatch(/"host"/);
    expect(problemOf(text({ ...valid, nonce: '' }))).toMatch(/"nonce"/);
    expect(problemOf(text({ ...valid, term: -1 }))).toMatch(/"term"/);
    expect(problemOf(text({ ...valid, released: 'yes' }))).toMatch(/"released"/);
    expect(problemOf(new Uint8Array(MAX_RECORD_BYTES + 1))).toMatch(/bytes/);
  });

  it('every serialization of a renewal differs (nonce), so two writes never share bytes', () => {
    const a = serializeLeaseRecord({ ...valid, nonce: 'x' });
    const b = serializeLeaseRecord({ ...valid, nonce: 'y' });
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
  });
});
