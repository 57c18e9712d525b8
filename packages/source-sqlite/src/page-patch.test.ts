import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CommitRecord } from './commit-record.ts';
import {
  applyPatch,
  copyOf,
  diffPage,
  PageBases,
  PageWrites,
  PatchOverlay,
  patchProblem,
} from './page-patch.ts';
import { PatchablePages } from './patchable-pages.ts';

const PAGE = 512;

function pageOf(fill: number): Uint8Array {
  return new Uint8Array(PAGE).fill(fill);
}

describe('diffPage', () => {
  it('gives the runs that differ, merging runs closer than a run header, and no runs for an equal page', () => {
    const base = pageOf(1);
    const page = base.slice();
    page[10] = 9;
    page[13] = 9; // 2 bytes apart: one run 10..13
    page[100] = 9;
    page[101] = 9; // far from the first: a run of its own
    page[511] = 9; // the last byte
    const runs = diffPage(base, page, PAGE)!;
    expect(runs.map((run) => [run.offset, run.bytes.byteLength])).toEqual([
      [10, 4],
      [100, 2],
      [511, 1],
    ]);
    expect(diffPage(base, base.slice(), PAGE)).toEqual([]);
  });

  it('answers null once the patch would take as much as maxEncodedBytes', () => {
    const base = pageOf(1);
    const page = pageOf(2);
    expect(diffPage(base, page, PAGE)).toBeNull();
    const one = base.slice();
    one[0] = 2;
    // 4 (count) + 8 (run header) + 1 byte = 13.
    expect(diffPage(base, one, 13)).toBeNull();
    expect(diffPage(base, one, 14)).toHaveLength(1);
  });

  it('gives the same runs for unaligned views as for aligned copies', () => {
    const backing = new Uint8Array(PAGE + 1);
    const base = pageOf(3);
    const page = base.slice();
    page.fill(7, 200, 230);
    backing.set(page, 1);
    const unaligned = backing.subarray(1);
    const aligned = diffPage(base, page, PAGE)!;
    const fromUnaligned = diffPage(base, unaligned, PAGE)!;
    expect(fromUnaligned.map((r) => [r.offset, [...r.bytes]])).toEqual(
      aligned.map((r) => [r.offset, [...r.bytes]]),
    );
  });

  it('gives the right runs for unaligned Buffer views (whose slice() is a view, not a copy)', () => {
    const base = pageOf(3);
    const page = base.slice();
    page.fill(7, 200, 230);
    page[0] = 1;
    // Deep inside larger memory (as a page of a log body is), at odd
    // offsets; the memory's first bytes equal in both, unlike the pages.
    const baseBacking = Buffer.alloc(4 * PAGE);
    baseBacking.set(base, 2 * PAGE + 1);
    const pageBacking = Buffer.alloc(4 * PAGE);
    pageBacking.set(page, 2 * PAGE + 3);
    const runs = diffPage(
      baseBacking.subarray(2 * PAGE + 1, 3 * PAGE + 1),
      pageBacking.subarray(2 * PAGE + 3, 3 * PAGE + 3),
      PAGE,
    )!;
    expect(runs.map((r) => [r.offset, r.bytes.byteLength])).toEqual([
      [0, 1],
      [200, 30],
    ]);
    const rebuilt = base.slice();
    applyPatch(rebuilt, runs);
    expect(rebuilt).toEqual(page);
  });

  it('round trips: the base with the patch applied is the page (property)', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: PAGE, maxLength: PAGE }),
        fc.array(
          fc.tuple(fc.integer({ min: 0, max: PAGE - 1 }), fc.integer({ min: 0, max: 255 })),
          {
            maxLength: 80,
          },
        ),
        (base, edits) => {
          const page = base.slice();
          for (const [at, value] of edits) page[at] = value;
          const runs = diffPage(base, page, Number.POSITIVE_INFINITY)!;
          expect(patchProblem(runs, PAGE)).toBeNull();
          const rebuilt = base.slice();
          applyPatch(rebuilt, runs);
          expect(Buffer.from(rebuilt).equals(Buffer.from(page))).toBe(true);
        },
      ),
    );
  });

  it('refuses pages of different sizes', () => {
    expect(() => diffPage(pageOf(0), new Uint8Array(PAGE * 2), PAGE)).toThrow(RangeError);
  });
});

describe('patchProblem', () => {
  it('names an empty run, overlapping or descending runs, and a run past the page', () => {
    const bytes = (n: number) => new Uint8Array(n);
    expect(patchProblem([{ offset: 0, bytes: bytes(0) }], PAGE)).toMatch(/run 1 is empty/);
    expect(
      patchProblem(
        [
          { offset: 10, bytes: bytes(5) },
          { offset: 12, bytes: bytes(1) },
        ],
        PAGE,
      ),
    ).toMatch(/run 2 starts at byte 12, before the end of the run before it \(15\)/);
    expect(patchProblem([{ offset: 510, bytes: bytes(3) }], PAGE)).toMatch(
      /ends at byte 513, past the 512-byte page/,
    );
    expect(patchProblem([{ offset: 509, bytes: bytes(3) }], PAGE)).toBeNull();
  });
});

describe('PatchOverlay', () => {
  it('overlays later patches over earlier ones without the base, and gives them back as one patch', () => {
    const overlay = new PatchOverlay(PAGE);
    overlay.add([{ offset: 10, bytes: new Uint8Array([1, 1, 1, 1]) }]);
    overlay.add([
      { offset: 12, bytes: new Uint8Array([2, 2, 2]) },
      { offset: 300, bytes: new Uint8Array([3]) },
    ]);
    expect(overlay.runs().map((r) => [r.offset, [...r.bytes]])).toEqual([
      [10, [1, 1, 2, 2, 2]],
      [300, [3]],
    ]);
    const base = pageOf(9);
    const expected = base.slice();
    expected.set([1, 1, 2, 2, 2], 10);
    expected[300] = 3;
    expect([...overlay.over(base)]).toEqual([...expected]);
    // The base is not changed.
    expect(base.every((b) => b === 9)).toBe(true);
    // Nor a Buffer base, whose slice() would be a view of it.
    const buffer = Buffer.alloc(PAGE, 9);
    overlay.over(buffer);
    expect(buffer.every((b) => b === 9)).toBe(true);
  });
});

describe('copies that copy', () => {
  it('copyOf copies a Buffer view; PageWrites keeps no view of the pages it is given', () => {
    const backing = Buffer.alloc(2 * PAGE, 4);
    const view = backing.subarray(PAGE);
    const copy = copyOf(view);
    backing.fill(5);
    expect(copy.every((b) => b === 4)).toBe(true);
    expect(copy.buffer).not.toBe(backing.buffer);

    const writes = new PageWrites(PAGE);
    const input = Buffer.alloc(PAGE, 6);
    writes.whole(2, input);
    writes.patch(2, [{ offset: 0, bytes: new Uint8Array([1, 2, 3]) }]);
    // The patch went into the held copy, never into the caller's bytes.
    expect(input.every((b) => b === 6)).toBe(true);
    input.fill(7);
    expect([...writes.pages.get(2)!.subarray(0, 4)]).toEqual([1, 2, 3, 6]);
  });
});

describe('PatchablePages', () => {
  const record = (
    databasePages: number,
    whole: number[],
    patched: number[] = [],
  ): CommitRecord => ({
    pageSize: PAGE,
    databasePages,
    commitTime: 0,
    walSalt1: 0,
    walSalt2: 0,
    commitFrame: 0,
    pages: new Map(whole.map((n) => [n, pageOf(n)])),
    patches: new Map(patched.map((n) => [n, [{ offset: 0, bytes: new Uint8Array([n]) }]])),
  });

  it("holds the start's pages and those written since, less every page above a size since", () => {
    const pages = new PatchablePages(19);
    expect(pages.unheld(record(19, [], [1, 19]))).toBeNull();
    // Above the snapshot, never written: no base.
    expect(pages.unheld(record(34, [], [3, 25]))).toBe(25);
    pages.advance(record(34, [20, 25], [3]));
    expect(pages.unheld(record(34, [], [20, 25]))).toBeNull();
    // A shrink to 19 drops 20 and 25; a page of the start kept stays.
    pages.advance(record(19, [], [2]));
    expect(pages.unheld(record(34, [], [25]))).toBe(25);
    expect(pages.unheld(record(34, [], [19]))).toBeNull();
    // Written whole again after the shrink: a base again.
    pages.advance(record(34, [25]));
    expect(pages.unheld(record(34, [], [25]))).toBeNull();
    // A shrink below the start's size drops start pages too.
    pages.advance(record(10, []));
    expect(pages.unheld(record(19, [], [11]))).toBe(11);
    expect(pages.databasePages).toBe(10);
  });

  it('drops a page a record wrote above its own size (a frame spilled before the cut)', () => {
    const pages = new PatchablePages(5);
    pages.advance(record(5, [7]));
    expect(pages.holds(7)).toBe(false);
  });

  it('from an unknown start (Infinity) holds every page until a size drops it; clone is independent', () => {
    const pages = new PatchablePages(Number.POSITIVE_INFINITY);
    expect(pages.holds(1_000_000)).toBe(true);
    const copy = pages.clone();
    copy.advance(record(8, []));
    expect(copy.holds(9)).toBe(false);
    expect(pages.holds(9)).toBe(true);
  });
});

describe('PageBases', () => {
  it('keeps the newest version of each page and drops the least recently written past its bound', () => {
    const bases = new PageBases(2 * PAGE);
    bases.set(1, pageOf(1));
    bases.set(2, pageOf(2));
    bases.set(1, pageOf(11)); // page 1 written again: now the most recent
    bases.set(3, pageOf(3)); // over the bound: page 2 goes
    expect(bases.get(1)?.[0]).toBe(11);
    expect(bases.get(2)).toBeUndefined();
    expect(bases.get(3)?.[0]).toBe(3);
    expect(bases.bytes).toBe(2 * PAGE);
  });

  it('dropAbove lets every version above a database size go, and its bytes', () => {
    const bases = new PageBases(8 * PAGE);
    for (const n of [1, 5, 19, 20, 34]) bases.set(n, pageOf(n));
    bases.dropAbove(19);
    expect([1, 5, 19, 20, 34].map((n) => bases.get(n) !== undefined)).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
    expect(bases.bytes).toBe(3 * PAGE);
  });

  it('keeps nothing with a bound of 0, and refuses a negative bound', () => {
    const bases = new PageBases(0);
    bases.set(1, pageOf(1));
    expect(bases.get(1)).toBeUndefined();
    expect(bases.bytes).toBe(0);
    expect(() => new PageBases(-1)).toThrow(RangeError);
  });
});
