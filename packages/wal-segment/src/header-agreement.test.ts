import { describe, expect, it } from 'vitest';
import { segmentHeaderDisagreements } from './header-agreement.ts';
import { encodeSegmentObject, readSegmentObjectHeader } from './segment-object.ts';

const body = new TextEncoder().encode('hello');
const header = readSegmentObjectHeader(
  encodeSegmentObject(body, {
    codec: 'identity',
    kind: 'segment',
    generation: 3,
    start: 10,
    end: 15,
    commits: 1,
    previousCrc32: 0,
    lineage: 'lin',
  }),
);
const expected = {
  kind: 'segment',
  generation: 3,
  start: 10,
  end: 15,
  commits: 1,
  lineage: 'lin',
} as const;

describe('segmentHeaderDisagreements', () => {
  it('is empty for a header that says what its key and entry say', () => {
    expect(segmentHeaderDisagreements(header, expected)).toEqual([]);
  });

  it('names every field that disagrees, in header order, with both values', () => {
    expect(
      segmentHeaderDisagreements(header, {
        ...expected,
        kind: 'compacted',
        end: 16,
        lineage: 'other',
      }),
    ).toEqual([
      { field: 'kind', found: 'segment', expected: 'compacted' },
      { field: 'end', found: 15, expected: 16 },
      { field: 'lineage', found: 'lin', expected: 'other' },
    ]);
    for (const field of ['generation', 'start', 'commits'] as const)
      expect(segmentHeaderDisagreements(header, { ...expected, [field]: 99 })).toEqual([
        { field, found: expected[field], expected: 99 },
      ]);
  });
});
