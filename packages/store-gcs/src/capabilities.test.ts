/**
 * The `capabilities` option, without a server: a mode declared off is
 * refused with NotImplementedError before any request is sent (the endpoint
 * here accepts no connections, so a request would fail differently).
 */
import { NotImplementedError } from '@x/store';
import { describe, expect, it } from 'vitest';
import { GcsStore } from './gcs-store.ts';

function storeWith(capabilities?: ConstructorParameters<typeof GcsStore>[0]['capabilities']) {
  return new GcsStore({
    bucket: 'b',
    apiEndpoint: 'http://127.0.0.1:9',
    projectId: 'p',
    maxRetries: 0,
    ...(capabilities ? { capabilities } : {}),
  });
}

describe('GcsStore capabilities', () => {
  it('declares everything by default, distinct versions included (generations)', () => {
    expect(storeWith().capabilities).toEqual({
      conditionalPut: true,
      conditionalDelete: true,
      multipartCreate: true,
      distinctVersions: true,
    });
  });

  it('refuses each mode declared off with NotImplementedError, sending nothing', async () => {
    const store = storeWith({
      conditionalPut: false,
      conditionalDelete: false,
      multipartCreate: false,
    });
    expect(store.capabilities.distinctVersions).toBe(true);
    const version = { generation: '12' };
    for (const call of [
      () => store.put('k', new Uint8Array([1]), { mode: 'create' }),
      () => store.put('k', new Uint8Array([1]), { mode: { ifMatch: version } }),
      () => store.delete('k', { ifMatch: version }),
      () => store.upload('k', new Uint8Array([1]), { mode: 'create' }),
    ]) {
      const error = await call().catch((caught: unknown) => caught);
      expect(NotImplementedError.isInstance(error), String(error)).toBe(true);
      expect((error as Error).message).toMatch(/configured with \w+: false/);
    }
  });

  it('keeps the other modes when one is declared off', async () => {
    const store = storeWith({ conditionalDelete: false });
    expect(store.capabilities).toMatchObject({ conditionalPut: true, multipartCreate: true });
    // An unconditional delete is still attempted (and fails on the closed port, not as NotImplemented).
    const error = await store.delete('k').catch((caught: unknown) => caught);
    expect(NotImplementedError.isInstance(error)).toBe(false);
  });
});
