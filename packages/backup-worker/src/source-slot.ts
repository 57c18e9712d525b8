/**
 * The worker's source and its lifecycle: given open (`source`, which the
 * caller closes) or opened by the worker (`openSource`) when it holds the
 * lease and is about to step, then closed when the lease is dropped or
 * released. The second form is for engines whose open has effects a standby
 * must not have: the SQLite source pins a read transaction, runs checkpoints
 * and keeps a commit-count state file that a waiting `replicate` would
 * overwrite. An opened source is closed exactly once, before the next opens;
 * a given one never. With nothing open the position is unknown (no lag).
 */
import type { BackupSource, SourceCallOptions } from '@x/engine';
import { BackupError, messageOf } from './errors.ts';
import type { BackupLogger, OpenSource } from './worker-options.ts';

export class SourceSlot {
  readonly #given: BackupSource | null;
  readonly #open: OpenSource | null;
  #opened: BackupSource | null = null;

  constructor(given: BackupSource | undefined, open: OpenSource | undefined) {
    if ((given === undefined) === (open === undefined))
      throw new BackupError('a BackupWorker needs exactly one of `source` and `openSource`');
    this.#given = given ?? null;
    this.#open = open ?? null;
  }

  /** The open source, or null while the worker has none open (`openSource`, lease not held). */
  get current(): BackupSource | null {
    return this.#given ?? this.#opened;
  }

  /** The open source; throws when none is (a step always opens it first). */
  get required(): BackupSource {
    const source = this.current;
    if (source === null) throw new BackupError('the backup source is not open');
    return source;
  }

  /** The open source, opening it first with `openSource` when none is. */
  async ensureOpen(options: SourceCallOptions): Promise<BackupSource> {
    const current = this.current;
    if (current !== null) return current;
    // Checked when the slot was made: with no source given, `#open` is set.
    this.#opened = await (this.#open as OpenSource)(options);
    return this.#opened;
  }

  /**
   * Closes the source `openSource` opened, if any (a given source stays
   * open). A failing close is logged, not thrown: the lease is already gone
   * and the next open starts afresh.
   */
  async closeOpened(logger: BackupLogger): Promise<void> {
    const opened = this.#opened;
    if (opened === null) return;
    this.#opened = null;
    try {
      await opened.close?.();
    } catch (error) {
      logger.warn('backup.source_close_failed', { error: messageOf(error) });
    }
  }
}
