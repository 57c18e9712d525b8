/**
 * `--restore-if-missing`: before any worker starts, each database that does
 * not exist is restored from its first URL (the restore point `LATEST`
 * names). A database that exists is left alone, whatever the bucket holds.
 * A failed restore throws, and replicate starts nothing.
 */
import { existsSync } from 'node:fs';
import type { BackupdConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { openStore } from '../open-store.ts';
import { restoreDatabase } from '../restore-database.ts';

/** Restores every missing database; resolves with the paths it restored. */
export async function restoreMissingDatabases(
  config: BackupdConfig,
  options: { readonly env: Readonly<Record<string, string | undefined>>; readonly logger: Logger },
): Promise<string[]> {
  const restored: string[] = [];
  for (const database of config.databases) {
    const first = database.urls[0];
    if (existsSync(database.path) || first === undefined) continue;
    const { store, prefix } = await openStore(first.location, options.env);
    options.logger.info({ event: 'restore-if-missing', database: database.path, from: first.text });
    const result = await restoreDatabase(store, prefix, database.path, { force: false });
    options.logger.info({
      event: 'restored',
      database: database.path,
      commitSeq: result.commitSeq,
      manifest: result.manifestKey,
    });
    restored.push(database.path);
  }
  return restored;
}
