/**
 * `verify --deep`: whether a compacted object holds what the fine segments
 * it covers held, while retention still keeps them, from what verify read
 * anyway (nothing is read again). The fine run is the chain of `.seg`
 * segments of its generation and lineage tiling its range from its
 * `previous`; it must end at the header's chain end, hold its commits and,
 * when nothing was merged away (framed), be its bytes (decoded CRC-32s
 * combined). Rules and limits: package README, `options.deep`.
 */
import { crc32Combine } from '@x/wal-segment';
import { ObjectEncodingError } from './restore-errors.ts';

/** What verify read of one decoded `.seg` object (every field checked against its key and entry). */
export interface DecodedLogObject {
  readonly key: string;
  readonly generation: number;
  readonly start: number;
  readonly end: number;
  readonly lineage: string;
  readonly commits: number;
  /** CRC-32 of the stored bytes (the manifest's, checked). */
  readonly storedCrc32: number;
  /** The header's `previous`. */
  readonly previousCrc32: number;
  /** CRC-32 of the decoded body (the header's, checked). */
  readonly bodyCrc32: number;
  readonly bodyLength: number;
}

/** A decoded compacted object: also its chain end and the whole frames of its body. */
export interface DecodedCompactedObject extends DecodedLogObject {
  readonly chainEndCrc32: number;
  readonly frames: number;
}

/** The decoded fine segments, by generation and start. */
export class FineSegmentIndex {
  readonly #byStart = new Map<string, DecodedLogObject[]>();

  add(fine: DecodedLogObject): void {
    const at = `${fine.generation}:${fine.start}`;
    const list = this.#byStart.get(at);
    if (list === undefined) this.#byStart.set(at, [fine]);
    else list.push(fine);
  }

  /**
   * The one chain of fine segments of `compacted`'s generation and lineage
   * from its start to its end whose first names its `previous`, or
   * `undefined` when there is none, or more than one link at some offset.
   */
  runOf(compacted: DecodedCompactedObject): DecodedLogObject[] | undefined {
    const run: DecodedLogObject[] = [];
    let cursor = compacted.start;
    let link = compacted.previousCrc32;
    while (cursor < compacted.end) {
      const next = (this.#byStart.get(`${compacted.generation}:${cursor}`) ?? []).filter(
        (fine) =>
          fine.lineage === compacted.lineage &&
          fine.end <= compacted.end &&
          fine.previousCrc32 === link,
      );
      if (next.length !== 1) return undefined;
      run.push(next[0]!);
      cursor = next[0]!.end;
      link = next[0]!.storedCrc32;
    }
    return run;
  }
}

const hex = (crc: number): string => crc.toString(16).padStart(8, '0');

/**
 * Why `compacted` does not hold what its fine run held (see the module
 * comment), as the refusal restore would raise; `undefined` when it does,
 * or when its fine run is not in `fine`.
 */
export function compactedCoverProblem(
  compacted: DecodedCompactedObject,
  fine: FineSegmentIndex,
): ObjectEncodingError | undefined {
  const run = fine.runOf(compacted);
  if (run === undefined) return undefined;
  const covered = `the fine segments it covers (${run.map((segment) => segment.key).join(', ')})`;
  const last = run.at(-1)!;
  if (last.storedCrc32 !== compacted.chainEndCrc32)
    return new ObjectEncodingError(
      compacted.key,
      'chainEndCrc32',
      `the header says ${hex(compacted.chainEndCrc32)}, ${covered} end with ${hex(last.storedCrc32)}`,
    );
  const commits = run.reduce((sum, segment) => sum + segment.commits, 0);
  if (commits !== compacted.commits)
    return new ObjectEncodingError(
      compacted.key,
      'commits',
      `the header says ${compacted.commits}, ${covered} hold ${commits}`,
    );
  const mergedNothing =
    compacted.bodyLength === compacted.end - compacted.start ||
    compacted.frames === compacted.commits;
  if (!mergedNothing) return undefined;
  let crc = run[0]!.bodyCrc32;
  let length = run[0]!.bodyLength;
  for (const segment of run.slice(1)) {
    crc = crc32Combine(crc, segment.bodyCrc32, segment.bodyLength);
    length += segment.bodyLength;
  }
  if (crc !== compacted.bodyCrc32 || length !== compacted.bodyLength)
    return new ObjectEncodingError(
      compacted.key,
      'body',
      `it merged nothing away (${compacted.frames} frames for ${compacted.commits} commits, ${compacted.bodyLength} bytes for ${compacted.end - compacted.start} of log), so it must hold ${covered} byte for byte, but decodes to ${compacted.bodyLength} bytes with CRC-32 ${hex(compacted.bodyCrc32)}, theirs to ${length} bytes with ${hex(crc)}`,
    );
  return undefined;
}
