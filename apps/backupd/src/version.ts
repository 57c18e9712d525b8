/**
 * backupd's version: the `version` of apps/backupd/package.json, read when
 * this module loads, so `--version`, the banner and the status endpoints say
 * what changesets released. Reading it at run time needs no build step (the
 * command runs from its sources) and `package.json` ships with every package.
 */
import { createRequire } from 'node:module';

function readVersion(): string {
  const manifest: unknown = createRequire(import.meta.url)('../package.json');
  if (
    typeof manifest === 'object' &&
    manifest !== null &&
    'version' in manifest &&
    typeof manifest.version === 'string'
  )
    return manifest.version;
  throw new Error('apps/backupd/package.json has no "version" string');
}

export const VERSION: string = readVersion();
