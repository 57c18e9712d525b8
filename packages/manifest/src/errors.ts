/**
 * Typed errors of the manifest package.
 *
 * Each class carries a `Symbol.for` marker and a `static isInstance`, so a
 * check still works when two copies of the package are installed.
 */

function markerOf(name: string): symbol {
  return Symbol.for(`x.manifest.error.${name}`);
}

function hasMarker(value: unknown, marker: symbol): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[marker] === true
  );
}

function truncateForMessage(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

const MANIFEST_ERROR_MARKER = markerOf('ManifestError');

/**
 * A manifest (or a LATEST object, then `document` is `'LATEST'`) was
 * refused: it is not a document this version of the format accepts. `field` is the path of the offending value
 * (`files[2].key`, `commitSeq`; empty for the document as a whole) and
 * `problem` says what is wrong with it. A refused restore point must not be
 * used: nothing it names can be trusted to be what it says.
 */
export class ManifestError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'MANIFEST_INVALID';
  readonly field: string;
  readonly problem: string;

  /** Which document was refused: a manifest, or the LATEST object. */
  readonly document: 'manifest' | 'LATEST';

  constructor(
    field: string,
    problem: string,
    options: { cause?: unknown; document?: 'manifest' | 'LATEST' } = {},
  ) {
    const document = options.document ?? 'manifest';
    super(
      field === ''
        ? `invalid ${document}: ${problem}`
        : `invalid ${document} field ${field}: ${problem}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.document = document;
    this.name = 'ManifestError';
    this.field = field;
    this.problem = problem;
    (this as unknown as Record<symbol, boolean>)[MANIFEST_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is ManifestError {
    return hasMarker(value, MANIFEST_ERROR_MARKER);
  }
}

const KEY_LAYOUT_ERROR_MARKER = markerOf('KeyLayoutError');

/**
 * A key constructor was given an argument it cannot turn into a key of the
 * layout: a prefix that is not a valid key, a number that is negative, not an
 * integer or beyond 2^53 − 1, a name that is not a plain file name, a CRC that
 * is not 8 lowercase hex digits, or a result longer than a store accepts.
 * This is a caller's bug, never a property of a bucket's contents.
 */
export class KeyLayoutError extends Error {
  /** Whether the same call, made again later, may succeed with nothing else changed. */
  get retryable(): boolean {
    return false;
  }

  readonly code = 'KEY_LAYOUT_INVALID';
  readonly argument: string;
  readonly problem: string;

  constructor(argument: string, value: unknown, problem: string) {
    super(`invalid ${argument} ${JSON.stringify(truncateForMessage(String(value)))}: ${problem}`);
    this.name = 'KeyLayoutError';
    this.argument = argument;
    this.problem = problem;
    (this as unknown as Record<symbol, boolean>)[KEY_LAYOUT_ERROR_MARKER] = true;
  }

  static isInstance(value: unknown): value is KeyLayoutError {
    return hasMarker(value, KEY_LAYOUT_ERROR_MARKER);
  }
}
