/**
 * Sets of commit numbers as sorted, merged, inclusive intervals: what the
 * restore points of a prefix cover (`backupd ls`: every commit in
 * `[restorableFrom, commitSeq]` of a healthy restore point restores).
 */
export type Interval = readonly [number, number];

export interface RestorePoint {
  readonly manifestKey: string;
  readonly commitSeq: number;
  readonly latest: boolean;
  readonly status: 'ok' | 'problems';
  readonly problems: readonly string[];
  readonly restorableFrom?: number;
  readonly walGeneration?: number;
}

export function merge(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [start, end] of sorted) {
    const last = out[out.length - 1];
    if (last && start <= last[1] + 1) last[1] = Math.max(last[1], end);
    else out.push([start, end]);
  }
  return out;
}

export function covered(points: readonly RestorePoint[]): Interval[] {
  return merge(
    points
      .filter((point) => point.status === 'ok')
      .map((point): Interval => [point.restorableFrom ?? point.commitSeq, point.commitSeq]),
  );
}

export function size(intervals: readonly Interval[]): number {
  return intervals.reduce((sum, [start, end]) => sum + (end - start + 1), 0);
}

/** The commits in `a` that are not in `b` (both merged). */
export function difference(a: readonly Interval[], b: readonly Interval[]): Interval[] {
  const out: Interval[] = [];
  for (const [start, end] of a) {
    let cursor = start;
    for (const [bStart, bEnd] of b) {
      if (bEnd < cursor || bStart > end) continue;
      if (bStart > cursor) out.push([cursor, bStart - 1]);
      cursor = Math.max(cursor, bEnd + 1);
      if (cursor > end) break;
    }
    if (cursor <= end) out.push([cursor, end]);
  }
  return out;
}

export function format(intervals: readonly Interval[], limit = 8): string {
  const parts = intervals
    .slice(0, limit)
    .map(([start, end]) => (start === end ? `${start}` : `${start}..${end}`));
  if (intervals.length > limit) parts.push(`… (${intervals.length - limit} more)`);
  return parts.join(', ') || '(none)';
}

/** Every commit in the intervals, for sampling (the soak's sets are thousands, not millions). */
export function members(intervals: readonly Interval[]): number[] {
  const out: number[] = [];
  for (const [start, end] of intervals)
    for (let commit = start; commit <= end; commit += 1) out.push(commit);
  return out;
}

/** What {@link compactedInteriors} reads of a manifest. */
export interface ChainShape {
  readonly oldestCommitSeq: number;
  readonly files: readonly { readonly frames: number }[];
  readonly segments: readonly { readonly key: string; readonly frames: number }[];
}

/**
 * The commits strictly inside the compacted entries of a restore point's
 * chain: restorable only at the entry's end (the compaction's boundary), so
 * a restore of one is refused, by design, not lost.
 */
export function compactedInteriors(
  manifest: ChainShape,
  isCompacted: (key: string) => boolean,
): Interval[] {
  let boundary = manifest.oldestCommitSeq + manifest.files.reduce((n, f) => n + f.frames, 0);
  const inside: Interval[] = [];
  for (const segment of manifest.segments) {
    if (isCompacted(segment.key) && segment.frames > 1)
      inside.push([boundary + 1, boundary + segment.frames - 1]);
    boundary += segment.frames;
  }
  return merge(inside);
}
