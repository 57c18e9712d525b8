import { describe, expect, it, vi } from 'vitest';
import {
  abortReasonOr,
  credentialFreeCause,
  jitteredBackoffMs,
  newWriteId,
  refusedWriteError,
  requireCapability,
  sleepUnlessAborted,
  sortedListResult,
} from './adapter-support.ts';
import { AlreadyExistsError, NotImplementedError, PreconditionFailedError } from './errors.ts';
import type { StoreCapabilities } from './object-store.ts';

describe('sleepUnlessAborted', () => {
  it('resolves after the wait', async () => {
    vi.useFakeTimers();
    try {
      let done = false;
      const waiting = sleepUnlessAborted(1_000, undefined).then(() => {
        done = true;
      });
      await vi.advanceTimersByTimeAsync(999);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await waiting;
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('rejects with the reason of a signal that has already fired, without waiting', async () => {
    const reason = new Error('stop');
    await expect(sleepUnlessAborted(60_000, AbortSignal.abort(reason))).rejects.toBe(reason);
  });

  it('rejects with the reason as soon as the signal fires during the wait', async () => {
    const controller = new AbortController();
    const reason = new Error('stop now');
    const waiting = sleepUnlessAborted(60_000, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
  });
});

describe('jitteredBackoffMs', () => {
  it('stays in the upper half of the capped exponential ceiling', () => {
    const random = vi.spyOn(Math, 'random');
    try {
      random.mockReturnValue(0);
      expect(jitteredBackoffMs(1, 50, 1_000)).toBe(25);
      expect(jitteredBackoffMs(3, 50, 1_000)).toBe(100);
      expect(jitteredBackoffMs(10, 50, 1_000)).toBe(500);
      random.mockReturnValue(0.999_999);
      expect(jitteredBackoffMs(1, 50, 1_000)).toBeCloseTo(50, 3);
      expect(jitteredBackoffMs(10, 50, 1_000)).toBeCloseTo(1_000, 2);
    } finally {
      random.mockRestore();
    }
  });
});

describe('abortReasonOr', () => {
  it('gives the signal reason when aborted, the error otherwise', () => {
    const reason = new Error('reason');
    const error = new Error('sdk AbortError');
    expect(abortReasonOr(AbortSignal.abort(reason), error)).toBe(reason);
    expect(abortReasonOr(new AbortController().signal, error)).toBe(error);
    expect(abortReasonOr(undefined, error)).toBe(error);
  });
});

describe('newWriteId', () => {
  it('gives a new random UUID each call', () => {
    const first = newWriteId();
    expect(first).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(newWriteId()).not.toBe(first);
  });
});

describe('refusedWriteError', () => {
  it('is AlreadyExistsError for create, PreconditionFailedError for a replace', () => {
    expect(AlreadyExistsError.isInstance(refusedWriteError('k', 'create', false))).toBe(true);
    const changed = refusedWriteError('k', { ifMatch: { etag: '"1"' } }, false);
    expect(PreconditionFailedError.isInstance(changed)).toBe(true);
    expect(changed.message).not.toContain('no object');
    const gone = refusedWriteError('k', { ifMatch: { etag: '"1"' } }, true);
    expect(gone.message).toContain('(no object at the key)');
    expect(gone.key).toBe('k');
  });
});

describe('requireCapability', () => {
  const capabilities: StoreCapabilities = {
    conditionalPut: true,
    conditionalDelete: false,
    multipartCreate: true,
    distinctVersions: true,
  };
  const store = { capabilities, description: 'example://bucket' };

  it('passes a capability that is on and refuses one declared off, naming it', () => {
    expect(() => requireCapability(store, 'conditionalPut', 'put create', 'k')).not.toThrow();
    let thrown: unknown;
    try {
      requireCapability(store, 'conditionalDelete', 'delete ifMatch', 'k');
    } catch (error) {
      thrown = error;
    }
    expect(NotImplementedError.isInstance(thrown)).toBe(true);
    expect((thrown as NotImplementedError).operation).toBe('delete ifMatch');
    expect((thrown as NotImplementedError).message).toContain(
      'example://bucket is configured with conditionalDelete: false',
    );
  });
});

describe('sortedListResult', () => {
  it('sorts objects by UTF-8 bytes and lists each common prefix once', () => {
    const version = { etag: '"1"' };
    const result = sortedListResult(
      [
        { key: 'b', size: 1, version },
        { key: '\u{1F600}', size: 1, version },
        { key: '\uFFFD', size: 1, version },
        { key: 'a', size: 1, version },
      ],
      ['p/', 'o/', 'p/'],
    );
    // U+FFFD sorts before U+1F600 in UTF-8 byte order (not in UTF-16 code-unit order).
    expect(result.objects.map((object) => object.key)).toEqual(['a', 'b', '\uFFFD', '\u{1F600}']);
    expect(result.commonPrefixes).toEqual(['o/', 'p/']);
  });
});

describe('credentialFreeCause', () => {
  it('keeps the name and the redacted first line only, cut to the length given', () => {
    const original = new TypeError('bad token=SECRET here\nrequest: Authorization: SECRET');
    const cause = credentialFreeCause(original, (text) => text.replaceAll('SECRET', '[x]'));
    expect(cause).not.toBe(original);
    expect(cause.name).toBe('TypeError');
    expect(cause.message).toBe('bad token=[x] here');
    expect(credentialFreeCause(original, (text) => text, 3).message).toBe('bad');
    expect(credentialFreeCause('plain', (text) => text).name).toBe('Error');
  });
});
