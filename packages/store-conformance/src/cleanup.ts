/**
 * Cleaning up after the probe and the cases without trusting the store's
 * listing alone: a broken listing would leave behind every key it drops. Every
 * key written through a {@link KeyRecordingStore} is remembered; cleanup
 * deletes those and what it lists, and reports what it knows was left (failed
 * deletes, keys still listed, errors). Not known: keys the store holds that
 * it neither lists nor got through the recorder (another writer under the
 * prefix), and incomplete multipart uploads (invisible to `list`).
 */
import {
  isValidKey,
  type ObjectStore,
  type ObjectVersion,
  type PutOptions,
  StoreError,
  type UploadOptions,
  type UploadSource,
} from '@x/store';
import { ForwardingStore } from '@x/store/adapter';
import { describeError, forEachLimited } from './assertions.ts';

/** What a cleanup could not do. Absent from a report when everything written was deleted. */
export interface CleanupFailure {
  /** The prefix that was cleaned (keys under `prefix/`). */
  readonly prefix: string;
  /**
   * Objects known to be left: keys whose delete failed and that are still
   * there (or could not be looked at), plus keys still listed after the
   * sweep. A lower bound when `listed` is false.
   */
  readonly left: number;
  /** Up to 10 of the keys left, for a person to find them. */
  readonly sample: readonly string[];
  /** False when the final listing failed, so unrecorded objects may remain uncounted. */
  readonly listed: boolean;
  /** Every distinct error met, first seen first (at most 10). */
  readonly errors: readonly string[];
}

const MAX_LISTED = 10;

/**
 * Wraps a store and remembers the key of every `put` and `upload` sent
 * through it (before the call: a write whose answer was lost may still have
 * landed). Reads and deletes pass through untouched.
 */
export class KeyRecordingStore extends ForwardingStore {
  readonly #written = new Set<string>();

  constructor(inner: ObjectStore) {
    super(inner);
    // Mirror the store as given: a case checking for `listPages` or
    // `deleteMany` must not find the wrapper's (a fallback over the inner store).
    if (typeof inner.listPages !== 'function')
      Object.defineProperty(this, 'listPages', { value: undefined });
    if (typeof inner.deleteMany !== 'function')
      Object.defineProperty(this, 'deleteMany', { value: undefined });
  }

  /** Every key written (or attempted), in first-written order. */
  written(): string[] {
    return [...this.#written];
  }

  override put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ version: ObjectVersion }> {
    this.#written.add(key);
    return super.put(key, body, options);
  }

  override upload(
    key: string,
    source: UploadSource,
    options?: UploadOptions,
  ): Promise<{ version: ObjectVersion; size: number }> {
    this.#written.add(key);
    return super.upload(key, source, options);
  }
}

/**
 * Deletes every object under `prefix/`: the keys `written` (those under the
 * prefix) and the keys a listing shows, then lists once more to see what is
 * left. Never throws for a failed delete or listing: it reports them.
 * @returns `undefined` when nothing is known to be left and nothing failed.
 */
export async function cleanUpPrefix(
  store: ObjectStore,
  prefix: string,
  written: Iterable<string>,
  signal?: AbortSignal,
): Promise<CleanupFailure | undefined> {
  const under = `${prefix}/`;
  const call = signal ? { signal } : {};
  const errors: string[] = [];
  const note = (what: string, error: unknown) => {
    signal?.throwIfAborted();
    const line = `${what}: ${describeError(error)}`;
    if (errors.length < MAX_LISTED && !errors.includes(line)) errors.push(line);
  };
  const listUnder = async (): Promise<string[] | undefined> => {
    try {
      const listing = await store.list(under, call);
      const outside = listing.objects.find((info) => !info.key.startsWith(under));
      // Deleting a key outside the prefix would touch what is not ours.
      if (outside) throw new StoreError(`list returned a key outside the prefix: ${outside.key}`);
      return listing.objects.map((info) => info.key);
    } catch (error) {
      note(`list ${under}`, error);
      return undefined;
    }
  };

  const targets = new Set<string>();
  // An invalid key a store refused (the key cases send them) is no object to delete.
  for (const key of written) if (key.startsWith(under) && isValidKey(key)) targets.add(key);
  for (const key of (await listUnder()) ?? []) targets.add(key);
  const failed = new Set<string>();
  await forEachLimited([...targets], 16, async (key) => {
    try {
      await store.delete(key, call);
    } catch (error) {
      failed.add(key);
      note(`delete ${key}`, error);
    }
  });
  // A failed delete of a key that is not there (written, refused) leaves nothing.
  const stillThere = new Set<string>();
  await forEachLimited([...failed], 16, async (key) => {
    try {
      if ((await store.head(key, call)) !== null) stillThere.add(key);
    } catch (error) {
      stillThere.add(key); // Cannot tell: counted as left, the error says why.
      note(`head ${key}`, error);
    }
  });
  const after = await listUnder();
  const left = new Set([...stillThere, ...(after ?? [])]);
  if (left.size === 0 && errors.length === 0) return undefined;
  return {
    prefix,
    left: left.size,
    sample: [...left].sort().slice(0, MAX_LISTED),
    listed: after !== undefined,
    errors,
  };
}

/** One line for a person: how many objects were left where, and why. */
export function describeCleanupFailure(failure: CleanupFailure): string {
  const count = failure.listed ? `${failure.left}` : `at least ${failure.left}`;
  const what = `${count} object${failure.left === 1 ? '' : 's'} left under ${failure.prefix}/`;
  const unlisted = failure.listed ? '' : ' (the listing failed: more may be there)';
  const errors = failure.errors.length > 0 ? `: ${failure.errors.join('; ')}` : '';
  return `${what}${unlisted}${errors}`;
}
