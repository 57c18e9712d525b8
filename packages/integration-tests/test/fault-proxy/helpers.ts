/** Shared by the proxy tests on the real servers. */
import type { ObjectStore } from '@x/store';
import { type FaultProxy, type FaultProxyOptions, startFaultProxy } from '@x/test-faults';
import { afterEach } from 'vitest';

export const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
export const text = (body: Uint8Array): string => new TextDecoder().decode(body);

/** Starts proxies in front of `target` and closes them after each test. */
export function proxyFactory(): (
  target: string,
  rules: FaultProxyOptions['schedule']['rules'],
  extra?: Partial<FaultProxyOptions>,
) => Promise<FaultProxy> {
  const open: FaultProxy[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((proxy) => proxy.close()));
  });
  return async (target, rules, extra = {}) => {
    const proxy = await startFaultProxy({ target, schedule: { rules }, seed: 17, ...extra });
    open.push(proxy);
    return proxy;
  };
}

/** The origin (scheme, host, port) of an endpoint URL. */
export function originOf(endpoint: string): string {
  return new URL(endpoint).origin;
}

/** The call's error, or a failure when it succeeded. */
export async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** Body of `key` read straight from the server (not through the proxy), or null. */
export async function bodyAt(store: ObjectStore, key: string): Promise<string | null> {
  const result = await store.get(key);
  return result === null ? null : text(result.body);
}
