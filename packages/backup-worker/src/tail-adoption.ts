/**
 * The tail a crashed run left after its newest restore point: `.seg` segments
 * no restore point names yet, which a restore of the latest state already
 * rolls forward over. A continued generation takes them into its log as they
 * are, so their commits keep their own restore points. Taken only under the
 * roll-forward's rules: a `.seg` key of the generation starting where the
 * chain ends; a header naming that generation, range and lineage, and as
 * `previousCrc32` the stored CRC-32 of the object before it (the last named
 * segment, else the snapshot); a body decoding to the header's length and
 * CRC-32. Compacted objects beyond the end are passed over; any other leftover
 * gives `null` (no offer). One GET per tail segment, each read whole.
 */
import { crc32Hex, type Manifest, parseSegmentKey, type SegmentEntry } from '@x/manifest';
import { decodeSegmentObject } from '@x/wal-segment';
import type { WorkerContext } from './context.ts';

export interface AdoptedTail {
  readonly entries: readonly SegmentEntry[];
  /** Where the log ends with the tail. */
  readonly logEnd: number;
  /** Commits the tail holds. */
  readonly commits: number;
}

export async function adoptTail(
  ctx: WorkerContext,
  latest: Manifest,
  logEnd: number,
  beyond: readonly string[],
): Promise<AdoptedTail | null> {
  const { prefix, requests } = ctx;
  const byStart = new Map<number, string>();
  for (const key of beyond) {
    const range = parseSegmentKey(prefix, key);
    if (range?.layout === 'compacted') continue;
    if (range === undefined || range.layout !== 'object' || byStart.has(range.start)) return null;
    byStart.set(range.start, key);
  }
  const entries: SegmentEntry[] = [];
  let end = logEnd;
  let commits = 0;
  let previous = latest.segments.at(-1)?.crc32 ?? latest.files[0]?.crc32 ?? '00000000';
  for (let key = byStart.get(end); key !== undefined; key = byStart.get(end)) {
    const range = parseSegmentKey(prefix, key)!;
    const object = await requests.get(key);
    if (object === null) return null;
    let header: ReturnType<typeof decodeSegmentObject>['header'];
    try {
      header = decodeSegmentObject(object.body).header;
    } catch {
      return null;
    }
    if (
      header.kind !== 'segment' ||
      header.generation !== latest.walGeneration ||
      header.start !== range.start ||
      header.end !== range.end ||
      header.lineage !== latest.lineage ||
      header.previousCrc32 !== Number.parseInt(previous, 16)
    )
      return null;
    previous = crc32Hex(object.body);
    entries.push({
      key,
      size: object.body.byteLength,
      crc32: previous,
      frames: header.commits,
      lineage: header.lineage,
    });
    commits += header.commits;
    end = range.end;
    byStart.delete(range.start);
  }
  // Anything not on the chain: not what a roll-forward reaches.
  if (byStart.size > 0) return null;
  return { entries, logEnd: end, commits };
}
