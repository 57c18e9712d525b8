/**
 * The stored bytes of objects this worker just wrote, so that a compaction
 * merging them need not GET them again (at one segment a second, a level-1
 * merge otherwise costs a GET per segment). Bounded, oldest out first; an
 * entry is handed out once. It holds what was sent, not what the bucket
 * holds, so the compaction checks a cached object as a downloaded one.
 */
export class StoredObjectCache {
  readonly #maxBytes: number;
  /** Insertion order is age: the first entry is the oldest. */
  readonly #entries = new Map<string, Uint8Array>();
  #bytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Bytes held. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Keeps `bytes` as `key`'s stored object, evicting the oldest beyond the bound; larger than the bound: not kept. */
  remember(key: string, bytes: Uint8Array): void {
    this.#drop(key);
    if (bytes.byteLength > this.#maxBytes) return;
    this.#entries.set(key, bytes);
    this.#bytes += bytes.byteLength;
    for (const [oldest] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#drop(oldest);
    }
  }

  /** `key`'s stored bytes, removed from the cache; `undefined` when not held. */
  take(key: string): Uint8Array | undefined {
    const bytes = this.#entries.get(key);
    if (bytes !== undefined) this.#drop(key);
    return bytes;
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  #drop(key: string): void {
    const bytes = this.#entries.get(key);
    if (bytes === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= bytes.byteLength;
  }
}
