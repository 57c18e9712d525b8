/**
 * Small assertion helpers for the conformance cases. The cases run without
 * vitest too (the compatibility report calls them directly), so they cannot
 * use `expect`; these throw a {@link ConformanceFailure} whose message is the
 * detail a report shows.
 */
import { isAbortError, type ObjectStore, StoreError } from '@x/store';

/** A conformance case found the store behaving against the interface's contract. */
export class ConformanceFailure extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConformanceFailure';
  }
}

export function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new ConformanceFailure(message);
}

export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/**
 * Awaits `promise`, expecting it to reject with an error that `accepts`.
 * @returns the error.
 */
export async function expectRejection(
  promise: Promise<unknown>,
  accepts: (error: unknown) => boolean,
  expected: string,
  what: string,
): Promise<unknown> {
  let outcome: { resolved: true; value: unknown } | { resolved: false; error: unknown };
  try {
    outcome = { resolved: true, value: await promise };
  } catch (error) {
    outcome = { resolved: false, error };
  }
  if (outcome.resolved)
    throw new ConformanceFailure(`${what}: expected ${expected}, but it succeeded`);
  if (!accepts(outcome.error))
    throw new ConformanceFailure(
      `${what}: expected ${expected}, got ${describeError(outcome.error)}`,
      { cause: outcome.error },
    );
  return outcome.error;
}

/** True when `error` is what an aborted signal rejects with: its reason, or an abort/timeout error. */
export function isAbortRejection(error: unknown, signal: AbortSignal): boolean {
  return error === signal.reason || isAbortError(error);
}

export const encoder = new TextEncoder();
export const decoder = new TextDecoder();

export function text(value: string): Uint8Array {
  return encoder.encode(value);
}

/** Reads `key` as UTF-8 text, or `null` when missing. */
export async function readText(
  store: ObjectStore,
  key: string,
  signal?: AbortSignal,
): Promise<string | null> {
  const result = await store.get(key, signal ? { signal } : {});
  return result === null ? null : decoder.decode(result.body);
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

/** Runs `work` over `items` with at most `limit` in flight. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Deletes every object under `prefix/` (and only there). */
export async function deleteUnder(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<void> {
  const listing = await store.list(`${prefix}/`, signal ? { signal } : {});
  await forEachLimited(listing.objects, 16, async (info) => {
    if (!info.key.startsWith(`${prefix}/`))
      throw new StoreError(`list returned a key outside the prefix: ${info.key}`);
    await store.delete(info.key, signal ? { signal } : {});
  });
}

export function randomSuffix(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}
