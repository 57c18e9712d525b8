/**
 * Formats are forever: prefixes written by the code right before SBC3
 * records (commit d1537e3, its own `backupd replicate` with compaction levels
 * of 1 s and 3 s, and its own BackupWorker compacting a framed store; see
 * `fixtures/README.md`) restore with the current code to exactly what that
 * code's restore produced, verify clean, list the same restore points,
 * refuse a copy with one byte of a segment or of a compacted object
 * changed, and take new commits from the current worker. Their commit logs
 * are compressed `.seg` objects and compacted `.L1.`/`.L2.` objects (SBC2
 * merged records in the SQLite one) beside compressed `.snap` snapshots.
 * The suites are `release-prefixes.ts`'s.
 */
import { describeReleasePrefixes } from './release-prefixes.ts';

describeReleasePrefixes({
  set: 'pre-patch-release',
  release: 'd1537e3',
  title: 'the release before page patches',
  sqliteKeyKinds: ['seg', 'snap', 'L1', 'L2'],
  framedKeyKinds: ['seg', 'snap', 'L1', 'L2'],
  latestNamesCompacted: true,
});
