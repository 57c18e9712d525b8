/**
 * `restore()` of `@x/restore` for the framed store directory: the same
 * guarantees, with {@link framedStoreMaterializer} as the layout.
 */
import { type RestoreOptions, type RestoreResult, restore } from '@x/restore';
import type { ObjectStore } from '@x/store';
import { framedStoreMaterializer } from './framed-materializer.ts';

/** Restore options without the materializer: it is the framed store directory's. */
export type FramedRestoreOptions = Omit<RestoreOptions, 'materializer'>;

/**
 * Restores a restore point of `prefix` into `targetDir` as a framed store
 * directory. Throws exactly what `restore()` throws.
 */
export function restoreFramedStore(
  store: ObjectStore,
  prefix: string,
  targetDir: string,
  options: FramedRestoreOptions = {},
): Promise<RestoreResult> {
  return restore(store, prefix, targetDir, { ...options, materializer: framedStoreMaterializer });
}
