/**
 * Whether a segment envelope's header says what the layout around it says:
 * its key (kind, generation, range) and its restore point's entry (commits,
 * lineage). One comparison for every reader that must refuse an object whose
 * header disagrees (restore, verify, the worker's compaction); each words
 * the refusal its own way.
 */
import type { SegmentObjectHeader, SegmentObjectKind } from './segment-object.ts';

/** What a segment's key and manifest entry say its header must hold. */
export interface ExpectedSegmentHeader {
  readonly kind: SegmentObjectKind;
  readonly generation: number;
  readonly start: number;
  readonly end: number;
  readonly commits: number;
  readonly lineage: string;
}

/** One header field that disagrees: what the header says, what was expected. */
export interface HeaderDisagreement {
  readonly field: keyof ExpectedSegmentHeader;
  readonly found: string | number;
  readonly expected: string | number;
}

const FIELDS: readonly (keyof ExpectedSegmentHeader)[] = [
  'kind',
  'generation',
  'start',
  'end',
  'commits',
  'lineage',
];

/** The fields of `header` that disagree with `expected`, in header order; empty when it agrees. */
export function segmentHeaderDisagreements(
  header: SegmentObjectHeader,
  expected: ExpectedSegmentHeader,
): HeaderDisagreement[] {
  return FIELDS.filter((field) => header[field] !== expected[field]).map((field) => ({
    field,
    found: header[field],
    expected: expected[field],
  }));
}
