import { describe, expect, it } from 'vitest';
import {
  gcsFailureOf,
  isTransient,
  redactSecrets,
  sanitizedCause,
  unexpectedFailure,
} from './errors.ts';

const privateKey =
  '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n';

describe('redactSecrets', () => {
  it('removes bearer tokens, private keys and OAuth secrets', () => {
    const text = `Authorization: Bearer ya29.a0AfH6SMB and ${privateKey} {"private_key":"abc\\ndef"} access_token=tok123&x=1`;
    const redacted = redactSecrets(text);
    expect(redacted).not.toContain('ya29.a0AfH6SMB');
    expect(redacted).not.toContain('MIIEvQIBADANBgkqhkiG9w0BAQEFAASC');
    expect(redacted).not.toContain('abc\\ndef');
    expect(redacted).not.toContain('tok123');
    expect(redacted).toContain('x=1');
  });
});

describe('error mapping', () => {
  const apiError = Object.assign(new Error('Precondition failed'), {
    name: 'ApiError',
    code: 412,
    errors: [{ reason: 'conditionNotMet' }],
    response: { request: { headers: { Authorization: 'Bearer ya29.secret-token' } } },
  });

  it('reads the status and reason', () => {
    expect(gcsFailureOf(apiError)).toEqual({ status: 412, reason: 'conditionNotMet' });
    expect(gcsFailureOf(Object.assign(new Error('x'), { code: 'ECONNRESET' }))).toEqual({
      status: undefined,
      reason: 'ECONNRESET',
    });
  });

  it('classifies transient failures', () => {
    expect(isTransient(Object.assign(new Error(), { code: 503 }))).toBe(true);
    expect(isTransient(Object.assign(new Error(), { code: 429 }))).toBe(true);
    expect(isTransient(Object.assign(new Error(), { code: 'ECONNRESET' }))).toBe(true);
    expect(isTransient(apiError)).toBe(false);
    expect(isTransient(Object.assign(new Error(), { code: 404 }))).toBe(false);
    expect(isTransient(new Error('plain'))).toBe(false);
  });

  it('never passes the response (and its Authorization header) on in the cause', () => {
    expect(JSON.stringify(apiError)).toContain('secret-token');
    const cause = sanitizedCause(apiError);
    expect(JSON.stringify(cause)).not.toContain('secret-token');
    expect(cause).toMatchObject({ status: 412, reason: 'conditionNotMet' });
    const failure = unexpectedFailure('put', 'k', apiError);
    expect(failure.message).toBe(
      'gcs put k failed (HTTP 412 conditionNotMet): Precondition failed',
    );
  });
});
