/** Progress reports of restore and verify, for a CLI to draw bars from. */

export interface RestoreProgress {
  /**
   * - `select`: reading LATEST and manifests to pick the restore point;
   * - `download`: streaming objects into staging (the byte counts move);
   * - `commit`: moving verified files into the target;
   * - `done`: finished.
   */
  readonly phase: 'select' | 'download' | 'commit' | 'done';
  /** Bytes of objects downloaded and checked so far. */
  readonly bytesDone: number;
  /** Bytes of every object this restore downloads (known once the restore point is picked; 0 before). */
  readonly bytesTotal: number;
  readonly objectsDone: number;
  readonly objectsTotal: number;
  /** The object being downloaded, during `download`. */
  readonly key?: string;
  /** The file it becomes (`wal.bin` for segments). */
  readonly name?: string;
}

export interface VerifyProgress {
  /**
   * `manifests`: reading manifests; `objects`: checking the objects they
   * name; `rebuild`: restoring one (`key`) into a scratch directory and
   * checking it (with `rebuild`); `done`.
   */
  readonly phase: 'manifests' | 'objects' | 'rebuild' | 'done';
  readonly manifestsDone: number;
  readonly manifestsTotal: number;
  readonly objectsDone: number;
  readonly objectsTotal: number;
  /** Bytes read for CRC checks (deep only). */
  readonly bytesDone: number;
  /** Bytes of the distinct objects to read (deep only; 0 otherwise). */
  readonly bytesTotal: number;
  readonly key?: string;
}

/** Calls `onProgress` at object boundaries and at most every `step` bytes within one. */
export const PROGRESS_BYTE_STEP = 4 * 1024 * 1024;
