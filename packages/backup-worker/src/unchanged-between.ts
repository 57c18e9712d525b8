import type { FileObservation } from '@x/engine';
/**
 * True when a read made between `before` and `after` can be kept: neither the
 * snapshot, the WAL file nor the intent changed, and the WAL did not shrink.
 */
export function unchangedBetween(before: FileObservation, after: FileObservation): boolean {
  return (
    before.snapshot === after.snapshot &&
    before.wal === after.wal &&
    (before.intentPending ?? false) === (after.intentPending ?? false) &&
    after.intentPending !== true &&
    after.walLength >= before.walLength
  );
}
