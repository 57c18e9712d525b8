import { StoreError } from '@x/store';
import { describe, expect, it } from 'vitest';
import { failuresOf } from './s3-delete-many.ts';
import type { S3Context } from './s3-requests.ts';

const context = { prefix: 'root/db' } as S3Context;

describe('failuresOf (the per-key errors of a DeleteObjects answer)', () => {
  it('names each failed key relative to the store, with the service code, and skips keys already absent', () => {
    const failed = failuresOf(context, [
      { Key: 'root/db/a', Code: 'AccessDenied', Message: 'Access Denied' },
      { Key: 'root/db/b', Code: 'NoSuchKey', Message: 'gone' },
      { Key: 'root/db/c/d', Code: 'InternalError' },
    ]);
    expect(failed.map((failure) => failure.key)).toEqual(['a', 'c/d']);
    expect(failed.every((failure) => StoreError.isInstance(failure.error))).toBe(true);
    expect(failed[0]?.error.message).toBe('s3 delete failed for a: Access Denied (AccessDenied)');
    expect(failed[1]?.error.message).toBe(
      's3 delete failed for c/d: InternalError (InternalError)',
    );
    expect(failed[0]?.error.key).toBe('a');
  });

  it('refuses an answer whose error names no key: the caller cannot know which key stayed', () => {
    expect(() => failuresOf(context, [{ Code: 'InternalError' }])).toThrow(
      /failure without naming its key \(InternalError\)/,
    );
  });
});
