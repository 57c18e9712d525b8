import { describe, expect, it } from 'vitest';
import * as adapter from './adapter.ts';
import * as consumer from './index.ts';

// The helpers only store authors need; `@x/store` itself must not carry them.
const ADAPTER_HELPERS = [
  'abortReasonOr',
  'credentialFreeCause',
  'jitteredBackoffMs',
  'listFromKeys',
  'newWriteId',
  'refusedWriteError',
  'requireCapability',
  'sleepUnlessAborted',
  'sortedListResult',
];

describe('entry points', () => {
  it('@x/store/adapter exports every adapter helper as a function', () => {
    for (const name of ADAPTER_HELPERS) {
      expect(typeof (adapter as Record<string, unknown>)[name], name).toBe('function');
    }
  });

  it('@x/store exports none of the adapter helpers', () => {
    const leaked = ADAPTER_HELPERS.filter((name) => name in consumer);
    expect(leaked).toEqual([]);
  });

  it('@x/store still exports the consumer API', () => {
    for (const name of [
      'MemoryStore',
      'FsStore',
      'PrefixedStore',
      'StoreError',
      'NotFoundError',
      'AlreadyExistsError',
      'PreconditionFailedError',
      'NotImplementedError',
      'ConflictError',
      'InvalidKeyError',
      'sameVersion',
      'listPages',
      'validateKey',
      'compareKeys',
      'getCapped',
      'chunksOf',
      'throwIfAborted',
      'isAbortError',
      'errorMarker',
      'markError',
      'hasErrorMarker',
    ]) {
      expect(name in consumer, name).toBe(true);
    }
  });
});
