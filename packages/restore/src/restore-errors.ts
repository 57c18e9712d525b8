/**
 * Typed refusals of restore, one class per failure a caller can act on.
 *
 * Each carries a `code`, the facts a person needs (which key, which target,
 * what was expected), a `Symbol.for` marker and `static isInstance`, so checks
 * survive two copies of the package. Store failures (transport, permission)
 * are not wrapped: they arrive as the store's own `StoreError`s, and an
 * aborted restore rejects with the signal's reason.
 */
import { errorMarker, hasErrorMarker, markError } from '@x/store';

const MARKER_NAMESPACE = 'x.backup-worker.restore.error';

export type RestoreErrorCode =
  | 'RESTORE_ERROR'
  | 'RESTORE_OPTIONS'
  | 'RESTORE_TARGET_NOT_EMPTY'
  | 'RESTORE_TARGET_UNSAFE'
  | 'NO_RESTORE_POINT'
  | 'RESTORE_POINT_REJECTED'
  | 'OBJECT_MISSING'
  | 'OBJECT_CORRUPT'
  | 'RESTORE_KEY_MISSING'
  | 'RESTORE_INCOMPLETE'
  | 'RESTORED_STATE_INVALID';

const RESTORE_ERROR_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoreError');

/** Base class of every restore refusal. */
export class RestoreError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code: RestoreErrorCode;

  constructor(
    message: string,
    code: RestoreErrorCode = 'RESTORE_ERROR',
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RestoreError';
    this.code = code;
    markError(this, RESTORE_ERROR_MARKER);
  }

  static isInstance(value: unknown): value is RestoreError {
    return hasErrorMarker(value, RESTORE_ERROR_MARKER);
  }
}

const OPTIONS_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoreOptionsError');

/** The options contradict each other or are out of range; nothing was read or written. */
export class RestoreOptionsError extends RestoreError {
  readonly option: string;

  constructor(option: string, problem: string) {
    super(`restore option ${option}: ${problem}`, 'RESTORE_OPTIONS');
    this.name = 'RestoreOptionsError';
    this.option = option;
    markError(this, OPTIONS_MARKER);
  }

  static override isInstance(value: unknown): value is RestoreOptionsError {
    return hasErrorMarker(value, OPTIONS_MARKER);
  }
}

const NOT_EMPTY_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoreTargetNotEmptyError');

/** The target directory holds files and `force` was not given; nothing was written. */
export class RestoreTargetNotEmptyError extends RestoreError {
  readonly targetDir: string;
  /** Up to ten of the entries found. */
  readonly entries: readonly string[];

  constructor(targetDir: string, entries: readonly string[]) {
    const shown = entries.slice(0, 10);
    super(
      `restore target ${targetDir} is not empty (${shown.join(', ')}${entries.length > shown.length ? ', …' : ''}); ` +
        'restore into an empty directory, or pass force to replace the store files in it',
      'RESTORE_TARGET_NOT_EMPTY',
    );
    this.name = 'RestoreTargetNotEmptyError';
    this.targetDir = targetDir;
    this.entries = shown;
    markError(this, NOT_EMPTY_MARKER);
  }

  static override isInstance(value: unknown): value is RestoreTargetNotEmptyError {
    return hasErrorMarker(value, NOT_EMPTY_MARKER);
  }
}

const UNSAFE_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoreTargetUnsafeError');

/**
 * The target cannot be written safely: it is not a directory, or it (or an
 * entry in it) is a symbolic link, which could send a write outside it.
 * Nothing was written.
 */
export class RestoreTargetUnsafeError extends RestoreError {
  readonly targetDir: string;
  readonly reason: string;

  constructor(targetDir: string, reason: string) {
    super(`restore target ${targetDir} refused: ${reason}`, 'RESTORE_TARGET_UNSAFE');
    this.name = 'RestoreTargetUnsafeError';
    this.targetDir = targetDir;
    this.reason = reason;
    markError(this, UNSAFE_MARKER);
  }

  static override isInstance(value: unknown): value is RestoreTargetUnsafeError {
    return hasErrorMarker(value, UNSAFE_MARKER);
  }
}

/** A commit range one restore point can restore to: any commit in `[from, to]`. */
export interface RestorableRange {
  readonly manifestKey: string;
  readonly from: number;
  readonly to: number;
}

const NO_POINT_MARKER = errorMarker(MARKER_NAMESPACE, 'NoRestorePointError');

/**
 * No restore point answers the request: the prefix has none, LATEST is
 * missing, or no manifest covers the requested commit. For a commit, the
 * nearest restorable commits below and above it are named (when they exist).
 */
export class NoRestorePointError extends RestoreError {
  readonly prefix: string;
  readonly requestedCommitSeq: number | undefined;
  /** The highest restorable commit below the request. */
  readonly nearestBelow: number | undefined;
  /** The lowest restorable commit above the request. */
  readonly nearestAbove: number | undefined;
  /** The ranges the readable restore points cover, oldest first. */
  readonly available: readonly RestorableRange[];

  constructor(
    prefix: string,
    detail: string,
    facts: {
      requestedCommitSeq?: number;
      nearestBelow?: number;
      nearestAbove?: number;
      available?: readonly RestorableRange[];
    } = {},
  ) {
    const nearest: string[] = [];
    if (facts.nearestBelow !== undefined) nearest.push(`nearest below: ${facts.nearestBelow}`);
    if (facts.nearestAbove !== undefined) nearest.push(`nearest above: ${facts.nearestAbove}`);
    super(
      `no restore point in ${prefix}: ${detail}${nearest.length > 0 ? ` (${nearest.join(', ')})` : ''}`,
      'NO_RESTORE_POINT',
    );
    this.name = 'NoRestorePointError';
    this.prefix = prefix;
    this.requestedCommitSeq = facts.requestedCommitSeq;
    this.nearestBelow = facts.nearestBelow;
    this.nearestAbove = facts.nearestAbove;
    this.available = facts.available ?? [];
    markError(this, NO_POINT_MARKER);
  }

  static override isInstance(value: unknown): value is NoRestorePointError {
    return hasErrorMarker(value, NO_POINT_MARKER);
  }
}

const REJECTED_MARKER = errorMarker(MARKER_NAMESPACE, 'RestorePointRejectedError');

/**
 * The restore point cannot be trusted as written: its manifest (or LATEST)
 * does not parse, names another lineage, names a file that would land
 * outside the target, a key outside the prefix, segments that do not chain,
 * or objects whose content disagrees with it (frame counts). Nothing was
 * written to the target.
 */
export class RestorePointRejectedError extends RestoreError {
  /** The manifest (or LATEST) key. */
  readonly key: string;
  readonly problems: readonly string[];

  constructor(key: string, problems: readonly string[], options?: { cause?: unknown }) {
    super(
      `restore point ${key} refused: ${problems.join('; ')}`,
      'RESTORE_POINT_REJECTED',
      options,
    );
    this.name = 'RestorePointRejectedError';
    this.key = key;
    this.problems = problems;
    markError(this, REJECTED_MARKER);
  }

  static override isInstance(value: unknown): value is RestorePointRejectedError {
    return hasErrorMarker(value, REJECTED_MARKER);
  }
}

const MISSING_MARKER = errorMarker(MARKER_NAMESPACE, 'ObjectMissingError');

/** An object the manifest names does not exist. Nothing was written to the target. */
export class ObjectMissingError extends RestoreError {
  readonly key: string;
  readonly manifestKey: string;

  constructor(key: string, manifestKey: string) {
    super(`object ${key} named by ${manifestKey} does not exist`, 'OBJECT_MISSING');
    this.name = 'ObjectMissingError';
    this.key = key;
    this.manifestKey = manifestKey;
    markError(this, MISSING_MARKER);
  }

  static override isInstance(value: unknown): value is ObjectMissingError {
    return hasErrorMarker(value, MISSING_MARKER);
  }
}

const CORRUPT_MARKER = errorMarker(MARKER_NAMESPACE, 'ObjectCorruptError');

/**
 * An object's size or CRC-32 differs from what the manifest records, or (a
 * stored-object envelope, `property: 'encoding'`, see
 * {@link ObjectEncodingError}) it does not decode to what its header and key
 * say. It was not used: nothing was written to the target.
 */
export class ObjectCorruptError extends RestoreError {
  readonly key: string;
  readonly property: 'size' | 'crc32' | 'encoding';
  readonly expected: string;
  readonly actual: string;

  constructor(
    key: string,
    property: 'size' | 'crc32' | 'encoding',
    expected: string,
    actual: string,
    message = `object ${key} is corrupt: ${property} expected ${expected}, found ${actual}`,
    options?: { cause?: unknown },
  ) {
    super(message, 'OBJECT_CORRUPT', options);
    this.name = 'ObjectCorruptError';
    this.key = key;
    this.property = property;
    this.expected = expected;
    this.actual = actual;
    markError(this, CORRUPT_MARKER);
  }

  static override isInstance(value: unknown): value is ObjectCorruptError {
    return hasErrorMarker(value, CORRUPT_MARKER);
  }
}

const ENCODING_MARKER = errorMarker(MARKER_NAMESPACE, 'ObjectEncodingError');

/**
 * A stored-object envelope (a `.seg` segment or `.snap` snapshot) matched
 * the manifest's size and CRC-32 but cannot be used: its header is invalid
 * (bad magic, unknown version, codec or encryption, header CRC), its body
 * does not decode or decodes to another length or CRC than the header says,
 * or the header disagrees with the key or the manifest entry (kind,
 * generation, range, commits, lineage, the chain CRC of the previous object),
 * or states another encryption or recipient set than its generation's first
 * object (`encryption`). `field` names the header field, `problem` says how. Also an {@link ObjectCorruptError} (`property:
 * 'encoding'`), so callers that handle corrupt objects handle it too. Nothing
 * of it was written to the target.
 */
export class ObjectEncodingError extends ObjectCorruptError {
  readonly field: string;
  readonly problem: string;

  constructor(key: string, field: string, problem: string, options?: { cause?: unknown }) {
    super(
      key,
      'encoding',
      field,
      problem,
      `object ${key} is corrupt: ${field}: ${problem}`,
      options,
    );
    this.name = 'ObjectEncodingError';
    this.field = field;
    this.problem = problem;
    markError(this, ENCODING_MARKER);
  }

  static override isInstance(value: unknown): value is ObjectEncodingError {
    return hasErrorMarker(value, ENCODING_MARKER);
  }
}

/** An encrypted object, with the recipients (`age1…`) whose identities open it. */
export interface LockedObject {
  readonly key: string;
  readonly recipients: readonly string[];
}

/** Where an identity came from and whom it answers to: never the secret key. */
export interface IdentityGiven {
  readonly source: string;
  readonly recipient: string;
}

/** Keys of one recipient set shown in a message; the rest are counted. */
const SHOWN_KEYS = 10;

function lockedList(objects: readonly LockedObject[]): string {
  const byRecipients = new Map<string, string[]>();
  for (const object of objects) {
    const recipients = object.recipients.join(', ');
    byRecipients.set(recipients, [...(byRecipients.get(recipients) ?? []), object.key]);
  }
  return [...byRecipients]
    .map(([recipients, keys]) => {
      const more = keys.length > SHOWN_KEYS ? ` and ${keys.length - SHOWN_KEYS} more` : '';
      return `${keys.slice(0, SHOWN_KEYS).join(', ')}${more} (encrypted to ${recipients})`;
    })
    .join('; ');
}

const KEY_MISSING_MARKER = errorMarker(MARKER_NAMESPACE, 'ObjectKeyError');

/**
 * Encrypted objects the restore needs that none of the age identities given
 * opens (none given, or none is one of their recipients). Names the objects,
 * their recipients and the identities given (source and recipient, never a
 * secret). Nothing was written to the target.
 */
export class ObjectKeyError extends RestoreError {
  /** Every object found locked, with its recipients. */
  readonly objects: readonly LockedObject[];
  /** The recipients of those objects, sorted: an identity of any one opens the objects listing it. */
  readonly recipients: readonly string[];
  readonly identities: readonly IdentityGiven[];
  /** Objects the restore needs whose headers were not read for this check (so not named). */
  readonly unchecked: number;

  constructor(
    objects: readonly LockedObject[],
    identities: readonly IdentityGiven[],
    options: { unchecked?: number; cause?: unknown } = {},
  ) {
    const given =
      identities.length === 0
        ? 'no age identity was given'
        : `identities given: ${identities.map((identity) => `${identity.recipient} from ${identity.source}`).join(', ')}`;
    const unchecked = options.unchecked ?? 0;
    const rest = unchecked > 0 ? `; ${unchecked} more objects were not checked` : '';
    super(
      `no age identity given opens ${objects.length === 1 ? 'the encrypted object' : `${objects.length} encrypted objects`} ${lockedList(objects)}${rest}; ${given}`,
      'RESTORE_KEY_MISSING',
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'ObjectKeyError';
    this.objects = objects;
    this.recipients = [...new Set(objects.flatMap((object) => object.recipients))].sort();
    this.identities = identities;
    this.unchecked = unchecked;
    markError(this, KEY_MISSING_MARKER);
  }

  static override isInstance(value: unknown): value is ObjectKeyError {
    return hasErrorMarker(value, KEY_MISSING_MARKER);
  }
}

const INCOMPLETE_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoreIncompleteError');

/**
 * Every object verified, but moving the files into the target failed part
 * way (a full disk, a permission, a vanished directory). The target may hold
 * some restored files and has no parent record: restore again with `force`.
 */
export class RestoreIncompleteError extends RestoreError {
  readonly targetDir: string;

  constructor(targetDir: string, cause: unknown) {
    super(
      `restore into ${targetDir} did not complete while moving files into place (${cause instanceof Error ? cause.message : String(cause)}); ` +
        'the directory holds a partial restore without a parent record: restore again with force',
      'RESTORE_INCOMPLETE',
      { cause },
    );
    this.name = 'RestoreIncompleteError';
    this.targetDir = targetDir;
    markError(this, INCOMPLETE_MARKER);
  }

  static override isInstance(value: unknown): value is RestoreIncompleteError {
    return hasErrorMarker(value, INCOMPLETE_MARKER);
  }
}

/** One thing wrong with a rebuilt restore point (see {@link RestoredStateError}). */
export interface RestoredStateFinding {
  /**
   * `integrity-check`: the engine's own check of the rebuilt state failed
   * (SQLite: `PRAGMA integrity_check`); `page-hash`: a page of the rebuilt
   * state is not the one its objects say it must be; `rebuild`: the engine
   * could not rebuild it at all.
   */
  readonly check: 'integrity-check' | 'page-hash' | 'rebuild';
  readonly message: string;
  /** The page (1-based) a `page-hash` finding is about. */
  readonly page?: number;
  /** For `page-hash`: the hash the page must have, and the one found (hex). */
  readonly expected?: string;
  readonly found?: string;
}

const RESTORED_STATE_MARKER = errorMarker(MARKER_NAMESPACE, 'RestoredStateError');

/**
 * Every object of the restore point verified, but the state the engine
 * rebuilt from them is wrong (an engine's deep check, as `verify` with
 * `rebuild` runs it). Nothing was written to the target.
 */
export class RestoredStateError extends RestoreError {
  /** The restore point (manifest key, or `commit N` when the engine does not know the key). */
  readonly restorePoint: string;
  readonly findings: readonly RestoredStateFinding[];

  constructor(restorePoint: string, findings: readonly RestoredStateFinding[]) {
    super(
      `restore point ${restorePoint} does not rebuild to a sound state: ${findings.map((finding) => finding.message).join('; ')}`,
      'RESTORED_STATE_INVALID',
    );
    this.name = 'RestoredStateError';
    this.restorePoint = restorePoint;
    this.findings = findings;
    markError(this, RESTORED_STATE_MARKER);
  }

  static override isInstance(value: unknown): value is RestoredStateError {
    return hasErrorMarker(value, RESTORED_STATE_MARKER);
  }
}
