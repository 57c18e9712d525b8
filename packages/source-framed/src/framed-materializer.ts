/**
 * The materializer of the framed store directory (`FramedDirSource`'s layout).
 *
 * A restore point becomes `snapshot.bin` (when the manifest has one), each
 * archive as `wal.{n}.archive`, the chain and side files by name, and
 * `wal.bin` rebuilt from the segments — cut after the frame that brings the
 * commit count to the requested one. `backup.lineage` is left out on
 * purpose: the restored store gets a lineage of its own at its first backup,
 * and the parent record names the lineage it came from. `snapshot.intent`
 * never travels, and a manifest naming it (or `wal.bin`, or the parent
 * record) is refused.
 */
import type { RestoreMaterializer } from '@x/engine';
import { parseArchiveName } from '@x/manifest';
import { FramedWalCutter, RestorePointRejectedError } from '@x/restore';
import {
  INTENT_FILE,
  LINEAGE_FILE,
  PARENT_FILE,
  SIDE_FILES,
  SNAPSHOT_FILE,
  WAL_FILE,
} from './framed-dir-source.ts';

/** Names a manifest entry may never restore to: they are rebuilt, never travel, or are restore's own. */
const REFUSED_NAMES = new Set<string>([WAL_FILE, INTENT_FILE, PARENT_FILE]);

function isFramedStoreName(name: string): boolean {
  return (
    name === SNAPSHOT_FILE ||
    name === WAL_FILE ||
    name === INTENT_FILE ||
    name === PARENT_FILE ||
    (SIDE_FILES as readonly string[]).includes(name) ||
    parseArchiveName(name) !== undefined
  );
}

/** The framed store directory of `@x/wal-segment` frames (see the module comment). */
export const framedStoreMaterializer: RestoreMaterializer = {
  name: 'framed-store-directory',
  walFileName: WAL_FILE,
  parentRecordName: PARENT_FILE,
  targetName(entry, manifest) {
    if (entry.name === LINEAGE_FILE) return null;
    if (REFUSED_NAMES.has(entry.name)) {
      throw new RestorePointRejectedError(`commit ${manifest.commitSeq}`, [
        `the manifest names a file ${JSON.stringify(entry.name)}, which a restore point never carries`,
      ]);
    }
    return entry.name;
  },
  createWalCutter(commits) {
    return new FramedWalCutter(commits);
  },
  ownsName: isFramedStoreName,
};
