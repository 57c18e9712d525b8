/** Building a `ListResult` from a sorted list of objects, for stores that list everything at once. */
import { compareKeys } from './keys.ts';
import type { ListResult, ObjectInfo } from './object-store.ts';

/**
 * Rolls keys up at `delimiter` after `prefix` the way S3 does: a key with the
 * delimiter after the prefix is replaced by its common prefix (up to and
 * including the first delimiter). `objects` must be sorted and all under `prefix`.
 */
export function listFromKeys(
  prefix: string,
  objects: readonly ObjectInfo[],
  delimiter?: string,
): ListResult {
  if (!delimiter) return { objects: [...objects], commonPrefixes: [] };
  const kept: ObjectInfo[] = [];
  const prefixes = new Set<string>();
  for (const info of objects) {
    const at = info.key.indexOf(delimiter, prefix.length);
    if (at === -1) kept.push(info);
    else prefixes.add(info.key.slice(0, at + delimiter.length));
  }
  return { objects: kept, commonPrefixes: [...prefixes].sort(compareKeys) };
}
