/**
 * How a verified restore point becomes files on disk. Restore does the
 * engine-independent part (pick, download and check into staging, move into
 * place); a materializer the engine's: which entries become which files,
 * where the rebuilt WAL ends for a commit, and an optional last step over
 * the staged files (e.g. applying a WAL to a database file). Restore
 * validates whatever it returns: plain file names only, written only inside
 * the staging directory, then renamed into the target.
 */
import type { FileEntry, Manifest } from '@x/manifest';

/**
 * Decides how much of the rebuilt WAL stream to keep. The segments of the
 * restore point are pushed through it in order, whole (also past the cut:
 * every byte of every segment is hashed, and the cutter counts the commits
 * of each segment so restore can check them against the manifest).
 */
export interface WalCutter {
  /**
   * Feeds the next bytes of the WAL stream. Returns how many bytes of `chunk`,
   * from its start, belong to the restored WAL. Once it has returned fewer
   * than `chunk.byteLength`, every later call returns 0.
   */
  push(chunk: Uint8Array): number;
  /**
   * Complete commits in everything pushed so far (kept or not), as the
   * engine counts them: the log ends at the first frame that is not whole
   * and valid. When the log ends before the wanted commit, `commitsKept` says
   * so and restore refuses the restore point.
   */
  readonly commitsSeen: number;
  /** Complete commits in the bytes kept so far. */
  readonly commitsKept: number;
  /**
   * For logs that batch commits: the batch the wanted commit fell inside
   * (its first and last commit, counted like `commits`), when it did. Such a
   * commit is not restorable by itself; its batch's edges are. Bytes of that
   * batch may already have been returned by `push` (before its header was
   * complete), so a caller that sees it set discards what it kept: restore
   * refuses the request and abandons its staged files.
   */
  readonly straddledBatch?: { readonly first: number; readonly last: number } | null;
}

/** The verified files of one restore, staged and not yet in the target. */
export interface StagedRestore {
  /** The staging directory (inside the target directory, same filesystem). */
  readonly directory: string;
  /** Plain file names present in `directory`, each fsynced. */
  readonly names: readonly string[];
  /** The manifest restored from. */
  readonly manifest: Manifest;
  /** The commit count the restored files hold. */
  readonly commitSeq: number;
}

export interface RestoreMaterializer {
  /** A short name for errors and progress, e.g. `framed-store-directory`. */
  readonly name: string;
  /**
   * The file a manifest entry becomes: a plain file name in the target, or
   * `null` to leave the entry out (it is then not downloaded at all).
   * Throws `RestorePointRejectedError` for an entry it does not accept.
   */
  targetName(entry: FileEntry, manifest: Manifest): string | null;
  /** The file the WAL segments are rebuilt into, in order (e.g. `wal.bin`). */
  readonly walFileName: string;
  /**
   * A fresh cutter that keeps the WAL up to the end of the `commits`-th
   * commit, counted from the start of the restore point's WAL.
   */
  createWalCutter(commits: number): WalCutter;
  /**
   * True for a file name this materializer's layout owns. A forced restore
   * into a non-empty target removes such files when the restore does not
   * write them (a stale archive or lineage file would corrupt the restored
   * store); other files are left alone.
   */
  ownsName(name: string): boolean;
  /**
   * True when the restored files live beside other files (a database file in
   * an application's directory): the target then counts as occupied only by
   * the names {@link ownsName} claims, and only those are checked for links.
   * False or absent: the target directory is the store's alone and must be
   * empty (without `force`).
   */
  readonly sharesDirectory?: boolean;
  /**
   * Optional last step over the staged, verified files before they move into
   * the target. May create, replace or delete files in `staged.directory`
   * (and nowhere else); returns the names to move into the target. Restore
   * fsyncs each of them before the move.
   */
  finish?(
    staged: StagedRestore,
    options: { readonly signal?: AbortSignal },
  ): Promise<readonly string[]>;
  /**
   * A hidden directory in the target that holds the layout's own small
   * files beside the restored ones (SQLite's `.<db>-backupd`). Names that
   * {@link finish} returns, {@link parentRecordName} and the names
   * {@link ownsName} is asked about may then be `<companionDirectory>/<name>`;
   * restore creates the directory, never follows it when it is a symbolic
   * link, and with `force` removes the owned files in it that it does not
   * write. Absent: every file is a plain name in the target.
   */
  readonly companionDirectory?: string;
  /**
   * Name of the parent record restore writes last (the framed store's is
   * `backup.parent`); its presence marks a completed restore, and the
   * engine's source reads it to adopt the prefix it came from.
   */
  readonly parentRecordName: string;
}

/**
 * An engine's proof that its restore points restore, for `verify` with
 * `rebuild`: verify restores each chosen restore point into a scratch
 * directory with {@link materializer}, whose `finish` rebuilds the staged
 * files, checks the result, and throws `RestoredStateError` naming what is
 * wrong. Restore stays engine-free: the engine brings the check.
 */
export interface RestoreCheck {
  /** A short name for reports, e.g. `sqlite`. */
  readonly name: string;
  /** True for a restore point of this engine's layout; verify rebuilds no other. */
  recognizes(manifest: Manifest): boolean;
  readonly materializer: RestoreMaterializer;
}
