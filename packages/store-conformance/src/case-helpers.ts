/**
 * What the cases share: keys under the case's prefix, call options with its
 * signal, reading back and checking an object's text, deterministic large
 * bodies, streamed digests, and the capability requirements.
 */
import { createHash } from 'node:crypto';
import { ConflictError, type ObjectStore, PreconditionFailedError } from '@x/store';
import { check, readText } from './assertions.ts';

import type { CapabilityRequirement, CaseContext } from './case-types.ts';

export const MIB = 1024 * 1024;

export function key(context: CaseContext, name: string): string {
  return `${context.prefix}/${name}`;
}

export function callOptions(context: CaseContext): { signal?: AbortSignal } {
  return context.signal ? { signal: context.signal } : {};
}

export async function expectText(
  context: CaseContext,
  name: string,
  expected: string | null,
  why: string,
) {
  const actual = await readText(context.store, key(context, name), context.signal);
  check(
    actual === expected,
    `${why}: expected ${expected === null ? 'no object' : JSON.stringify(expected)} at ${name}, found ${actual === null ? 'no object' : JSON.stringify(actual)}`,
  );
}

export function isRetryable(error: unknown): boolean {
  return PreconditionFailedError.isInstance(error) || ConflictError.isInstance(error);
}

/** Deterministic pseudo-random bytes, so the 20 MiB upload needs no 20 MiB buffer. */
export function* patternChunks(
  totalBytes: number,
  chunkBytes: number,
  seed: number,
): Generator<Uint8Array> {
  let state = seed >>> 0 || 1;
  for (let offset = 0; offset < totalBytes; offset += chunkBytes) {
    const chunk = new Uint8Array(Math.min(chunkBytes, totalBytes - offset));
    const words = new Uint32Array(chunk.buffer, 0, chunk.byteLength >>> 2);
    for (let index = 0; index < words.length; index++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      words[index] = state >>> 0;
    }
    yield chunk;
  }
}

export async function* asAsync(chunks: Iterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for (const chunk of chunks) yield chunk;
}

export async function streamDigest(
  store: ObjectStore,
  objectKey: string,
  signal?: AbortSignal,
): Promise<{ size: number; sha256: string } | null> {
  const result = await store.getStream(objectKey, signal ? { signal } : {});
  if (!result) return null;
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of result.body) {
    hash.update(chunk);
    size += chunk.byteLength;
  }
  return { size, sha256: hash.digest('hex') };
}

export const needsPut: CapabilityRequirement = { capability: 'conditionalPut', value: true };
export const needsDelete: CapabilityRequirement = { capability: 'conditionalDelete', value: true };
export const needsMultipart: CapabilityRequirement = { capability: 'multipartCreate', value: true };
export const needsDistinctVersions: CapabilityRequirement = {
  capability: 'distinctVersions',
  value: true,
};
