/**
 * Which compacted objects of a restore point the bucket still holds the fine
 * segments of (the worker keeps them for its exact window), from one listing
 * of the generation and the keys alone: a restore inside such an object
 * lands on the exact commit, once fine-run.ts has checked their chain.
 */
import { type Manifest, parseSegmentKey, segmentGenerationPrefix } from '@x/manifest';
import { listPages, type ObjectStore } from '@x/store';

/** The keys of `manifest`'s compacted objects whose range listed fine `.seg` objects tile. */
export async function compactedWithFineSegments(
  store: ObjectStore,
  prefix: string,
  manifest: Manifest,
  signal?: AbortSignal,
): Promise<Set<string>> {
  const compacted = manifest.segments.filter(
    (segment) => parseSegmentKey(prefix, segment.key)?.layout === 'compacted',
  );
  const tiled = new Set<string>();
  if (compacted.length === 0) return tiled;
  const endsByStart = new Map<number, number[]>();
  const generation = manifest.walGeneration;
  for await (const page of listPages(
    store,
    segmentGenerationPrefix(prefix, generation),
    signal === undefined ? {} : { signal },
  ))
    for (const object of page.objects) {
      const parsed = parseSegmentKey(prefix, object.key);
      if (parsed?.layout !== 'object' || parsed.generation !== generation) continue;
      const ends = endsByStart.get(parsed.start);
      if (ends === undefined) endsByStart.set(parsed.start, [parsed.end]);
      else ends.push(parsed.end);
    }
  for (const segment of compacted) {
    const range = parseSegmentKey(prefix, segment.key)!;
    if (reaches(endsByStart, range.start, range.end)) tiled.add(segment.key);
  }
  return tiled;
}

/** Whether ranges from `endsByStart` chain from `start` exactly to `end`. */
function reaches(endsByStart: ReadonlyMap<number, number[]>, start: number, end: number): boolean {
  const seen = new Set<number>();
  const open = [start];
  while (open.length > 0) {
    const at = open.pop()!;
    if (at === end) return true;
    if (seen.has(at)) continue;
    seen.add(at);
    for (const next of endsByStart.get(at) ?? []) if (next <= end) open.push(next);
  }
  return false;
}
