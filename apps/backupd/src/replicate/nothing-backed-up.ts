/**
 * "Nothing was backed up here yet": the one restore failure a first boot
 * may start fresh from. It is a missing `LATEST` on a prefix that holds no
 * object at all; a prefix with data whose restore fails (a corrupt or
 * missing `LATEST` beside manifests, segments or a lease) is a broken
 * backup, never a fresh start.
 */
import { NoRestorePointError, readLatest } from '@x/restore';
import { listPages, type ObjectStore } from '@x/store';

/** Whether `error` (from a restore of the latest) means the prefix holds nothing at all. */
export async function isNothingBackedUp(
  error: unknown,
  store: ObjectStore,
  prefix: string,
): Promise<boolean> {
  if (!NoRestorePointError.isInstance(error)) return false;
  if ((await readLatest(store, prefix)).state !== 'missing') return false;
  for await (const page of listPages(store, `${prefix}/`, { pageSize: 1 }))
    if (page.objects.length > 0 || page.commonPrefixes.length > 0) return false;
  return true;
}
