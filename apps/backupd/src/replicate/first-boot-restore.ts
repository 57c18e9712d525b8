/**
 * `--restore-if-missing`: before any worker starts, each database that does
 * not exist is restored from its first URL (the restore point `LATEST`
 * names). A database that exists is left alone, whatever the bucket holds.
 *
 * A first URL where nothing was backed up yet (no `LATEST`, no object at
 * all: {@link isNothingBackedUp}) is a first boot: the database starts
 * fresh, which is logged, and the caller waits for the application to
 * create it. Any other failed restore throws, and replicate starts nothing:
 * a broken backup is never started over.
 */
import { existsSync } from 'node:fs';
import type { BackupdConfig } from '../config.ts';
import { loadEncryptionKeys } from '../encryption-settings.ts';
import type { Logger } from '../logger.ts';
import { openStore } from '../open-store.ts';
import { restoreDatabase } from '../restore-database.ts';
import { isNothingBackedUp } from './nothing-backed-up.ts';

export interface FirstBoot {
  /** The databases restored. */
  readonly restored: string[];
  /** The missing databases whose first URL holds nothing yet: they start fresh. */
  readonly fresh: string[];
}

/** Restores every missing database, or marks it fresh when nothing was backed up at its first URL. */
export async function restoreMissingDatabases(
  config: BackupdConfig,
  options: { readonly env: Readonly<Record<string, string | undefined>>; readonly logger: Logger },
): Promise<FirstBoot> {
  const restored: string[] = [];
  const fresh: string[] = [];
  for (const database of config.databases) {
    const first = database.urls[0];
    // A directory's databases are never restored here: each is its own backup.
    if (database.directory || existsSync(database.path) || first === undefined) continue;
    const { store, prefix } = await openStore(first.location, options.env);
    options.logger.info({
      event: 'backupd.restore_if_missing',
      database: database.path,
      from: first.text,
    });
    let result: Awaited<ReturnType<typeof restoreDatabase>>;
    try {
      result = await restoreDatabase(store, prefix, database.path, {
        force: false,
        identities: loadEncryptionKeys(database.encryption, database.path).identities,
      });
    } catch (error) {
      if (!(await isNothingBackedUp(error, store, prefix))) throw error;
      options.logger.info({
        event: 'backupd.starting_fresh',
        database: database.path,
        from: first.text,
        note: `restore-if-missing: nothing backed up at ${first.text} yet; starting fresh`,
      });
      fresh.push(database.path);
      continue;
    }
    options.logger.info({
      event: 'backupd.restored',
      database: database.path,
      commitSeq: result.commitSeq,
      manifest: result.manifestKey,
    });
    if (result.fellBackFrom)
      options.logger.warn({
        event: 'backupd.restore_fell_back',
        database: database.path,
        reason: result.fellBackFrom.reason,
        note: "LATEST was unusable: restored the newest restore point that passes restore's checks",
      });
    restored.push(database.path);
  }
  return { restored, fresh };
}
