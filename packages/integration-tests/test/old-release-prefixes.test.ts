/**
 * Formats are forever: prefixes written by the previous release (commit
 * 390b4a8, its own `backupd replicate` and BackupWorker; see
 * `fixtures/README.md`) restore with the current code to exactly what that
 * release's restore produced, verify clean, list the same restore points,
 * refuse a copy with one segment byte changed, and take new commits from the
 * current worker. The suites are `release-prefixes.ts`'s.
 */
import { describeReleasePrefixes } from './release-prefixes.ts';

describeReleasePrefixes({
  set: 'old-release',
  release: '390b4a8',
  title: 'the previous release',
  // Raw objects, before compressed envelopes and compaction.
  sqliteKeyKinds: ['segment', 'snapshot'],
  framedKeyKinds: ['segment', 'snapshot'],
  latestNamesCompacted: false,
});
