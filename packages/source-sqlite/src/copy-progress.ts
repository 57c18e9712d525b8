/**
 * How much of the current WAL cycle is known to be copied into the database
 * file, by the tap's own checkpoints and by anyone's (as the wal-index
 * counts it), so the PASSIVE threshold counts from the last copy by anyone
 * and the tap leaves copying to an application that checkpoints on its own.
 * Only a heuristic for when to copy: nothing that keeps frames safe depends
 * on it. Forgotten whenever the WAL cycle changes.
 */
import type { CheckpointResult } from './checkpoint-calls.ts';

export class CopyProgress {
  /** Frames of the current WAL cycle SQLite reported copied at the tap's last checkpoint. */
  #copiedFrames = 0;
  /**
   * Frames of the current WAL cycle the wal-index counted as copied into the
   * database file at the last capture (by any connection's checkpoint), and
   * that count as of the previous maintain call (or the tap's own copy). When
   * it moved in between, the application is checkpointing on its own.
   */
  #backfilledFrames = 0;
  #backfilledSeen = 0;

  /** The wal-index's count of copied frames of this cycle, as a capture read it. */
  noteBackfilled(frames: number): void {
    this.#backfilledFrames = frames;
  }

  /**
   * Remembers how much of the WAL SQLite says is copied (the PASSIVE
   * threshold counts from there); `walFrames` is what the tap has captured
   * of the cycle.
   */
  noteCopied(result: CheckpointResult, walFrames: number): void {
    // Only a heuristic: SQLite may count commits the tap has not captured
    // yet, or (rarely) a cycle restarted in between.
    if (result.log >= walFrames) {
      this.#copiedFrames = Math.min(result.checkpointed, walFrames);
      // The tap's own copy is not the application checkpointing.
      this.#backfilledSeen = Math.max(this.#backfilledSeen, result.checkpointed);
    }
  }

  /**
   * True when the wal-index shows copies by someone else since the previous
   * call (or the tap's own copy); each call starts a new interval.
   */
  othersCopiedSinceLastLook(): boolean {
    const othersCopied = this.#backfilledFrames > this.#backfilledSeen;
    this.#backfilledSeen = this.#backfilledFrames;
    return othersCopied;
  }

  /** Frames of the `walFrames` captured known copied, by the tap or anyone. */
  copiedOf(walFrames: number): number {
    return Math.max(this.#copiedFrames, Math.min(this.#backfilledFrames, walFrames));
  }

  forget(): void {
    this.#copiedFrames = 0;
    this.#backfilledFrames = 0;
    this.#backfilledSeen = 0;
  }
}
