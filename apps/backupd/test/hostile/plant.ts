/**
 * Ways to plant hostile contents in a case's bucket, through the store API
 * (and, for the one filesystem case, beside it). Each returns nothing: the
 * table finds what was planted by comparing the store before and after.
 */
import { rename, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { latestKey, manifestKey } from '@x/manifest';
import type { ObjectStore } from '@x/store';
import { type CasePaths, latestManifest, PREFIX } from './bucket.ts';

export type Planter = (store: ObjectStore, paths: CasePaths) => Promise<void>;

const encoder = new TextEncoder();
const LEASE_KEY = `${PREFIX}/LEASE`;

/** LATEST holds exactly `text`. */
export function latestText(text: string | ((paths: CasePaths) => string)): Planter {
  return async (store, paths) => {
    await store.put(
      latestKey(PREFIX),
      encoder.encode(typeof text === 'string' ? text : text(paths)),
    );
  };
}

/** LATEST holds the key of the baseline's newest manifest followed by `bytes` spaces. */
export function hugeLatest(bytes: number): Planter {
  return async (store) => {
    const { key } = await latestManifest(store);
    await store.put(latestKey(PREFIX), encoder.encode(key + ' '.repeat(bytes)));
  };
}

/** A copy of the baseline's newest manifest at `key` (any key, also outside the prefix). */
export function manifestCopyAt(key: string): Planter {
  return async (store) => {
    const { key: source } = await latestManifest(store);
    const object = await store.get(source);
    await store.put(key, object!.body);
  };
}

/** Several planters, in order. */
export function all(...planters: Planter[]): Planter {
  return async (store, paths) => {
    for (const planter of planters) await planter(store, paths);
  };
}

type Json = Record<string, unknown> & {
  files: Record<string, unknown>[];
  segments: Record<string, unknown>[];
};

export interface ManifestEdit {
  /** Where the edited manifest goes: a commit number (its manifest key). Default 5. */
  readonly at?: number;
  /** Point LATEST at it. Default true. */
  readonly latest?: boolean;
  /** Changes the parsed JSON of the baseline's newest manifest (commit 4). */
  readonly edit?: (manifest: Json, paths: CasePaths) => void;
  /** Replaces the serialized text (after `edit`), for what JSON.stringify cannot write. */
  readonly text?: (text: string) => string;
}

/** The baseline's newest manifest, edited, at another key; LATEST names it (unless told otherwise). */
export function editedManifest(options: ManifestEdit): Planter {
  return async (store, paths) => {
    const { key } = await latestManifest(store);
    const object = await store.get(key);
    const json = JSON.parse(new TextDecoder().decode(object!.body)) as Json;
    options.edit?.(json, paths);
    let text = JSON.stringify(json, null, 2);
    if (options.text) text = options.text(text);
    const at = manifestKey(PREFIX, options.at ?? 5);
    await store.put(at, encoder.encode(text));
    if (options.latest ?? true) await store.put(latestKey(PREFIX), encoder.encode(at));
  };
}

/** Raw bytes at a manifest key; LATEST names it unless `latest` is false. */
export function manifestBytes(at: number, bytes: Uint8Array, latest = true): Planter {
  return async (store) => {
    await store.put(manifestKey(PREFIX, at), bytes);
    if (latest) await store.put(latestKey(PREFIX), encoder.encode(manifestKey(PREFIX, at)));
  };
}

/** An object at `key` holding `text`. */
export function object(key: string, text: string): Planter {
  return async (store) => {
    await store.put(key, encoder.encode(text));
  };
}

/** Rewrites an object the newest manifest names (`which` picks it). */
export function rewriteNamed(
  which: (manifest: Json) => string,
  change: (bytes: Uint8Array) => Uint8Array,
): Planter {
  return async (store) => {
    const { manifest } = await latestManifest(store);
    const key = which(manifest as unknown as Json);
    const object = await store.get(key);
    await store.put(key, change(object!.body));
  };
}

/** Deletes an object the newest manifest names. */
export function deleteNamed(which: (manifest: Json) => string): Planter {
  return async (store) => {
    const { manifest } = await latestManifest(store);
    await store.delete(which(manifest as unknown as Json));
  };
}

/** The key of the newest manifest's last segment. */
export const lastSegment = (manifest: Json): string => manifest.segments.at(-1)!.key as string;
/** The key of the newest manifest's file entry named `name`. */
export const fileNamed =
  (name: string) =>
  (manifest: Json): string =>
    manifest.files.find((file) => file.name === name)!.key as string;

/** The entry for `name` in `files` (throws when absent, so a planter cannot silently do nothing). */
export function entry(manifest: Json, name: string): Record<string, unknown> {
  const found = manifest.files.find((file) => file.name === name);
  if (found === undefined) throw new Error(`the baseline manifest has no file ${name}`);
  return found;
}

/** A lease record, as JSON, with `fields` over a plausible current holder. */
export function leaseRecord(
  fields: Record<string, unknown> | (() => Record<string, unknown>),
): Planter {
  return async (store) => {
    const now = Date.now();
    const record = {
      instanceId: 'f00dfeedf00dfeedf00dfeedf00dfeed',
      acquiredAt: now - 60_000,
      renewedAt: now,
      ttlSeconds: 30,
      generation: 3,
      host: 'elsewhere',
      pid: 4242,
      nonce: 'a1b2c3d4e5f6a1b2c3d4e5f6',
      ...(typeof fields === 'function' ? fields() : fields),
    };
    await store.put(LEASE_KEY, encoder.encode(`${JSON.stringify(record)}\n`));
  };
}

/** LEASE holds exactly `text`. */
export function leaseText(text: string): Planter {
  return async (store) => {
    await store.put(LEASE_KEY, encoder.encode(text));
  };
}

/**
 * Replaces the store's `backup/side` directory with a symbolic link to the
 * bait directory: a bucket on a file system someone else can write to.
 */
export function symlinkedSideDirectory(): Planter {
  return async (_store, paths) => {
    const side = join(paths.storeRoot, PREFIX, 'side');
    await rename(side, join(paths.root, 'side-moved-away'));
    await symlink(join(paths.restoreParent, 'etc'), side);
  };
}
