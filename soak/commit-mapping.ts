/**
 * The soak's check that backupd's commit numbers map onto the writer's
 * commits in order and, inside one WAL generation, one to one: each restore
 * names a backupd commit (`commitSeq`) and holds a writer commit (the
 * writer's own counter, read back from the restored database).
 *
 * One exception, documented in docs/format.md: a restart that continued a
 * generation after a crash puts what the application committed while no
 * replica ran first in its log as one commit. Across such a point
 * (`backup.generation_continued`, which names the commit count it continued
 * from) the writer may be further ahead than backupd, never behind.
 *
 * Pure: the soak passes the restores and the replicas' log lines in, and
 * runs {@link selfTestCommitMapping} first.
 */

/** One restore that found its writer commit. */
export interface MappedRestore {
  readonly commitSeq: number;
  readonly manifestKey: string;
  readonly writerCommit: number;
}

/**
 * Where replicas continued a generation, from their JSON log lines: WAL
 * generation → the commit counts continued from. Lines that are not a
 * well-formed `backup.generation_continued` event are passed over.
 */
export function continuationPointsOf(lines: Iterable<string>): Map<number, number[]> {
  const points = new Map<number, number[]>();
  for (const line of lines) {
    if (!line.includes('"backup.generation_continued"')) continue;
    let event: { event?: unknown; walGeneration?: unknown; commitSeq?: unknown };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue;
    }
    if (event.event !== 'backup.generation_continued') continue;
    if (typeof event.walGeneration !== 'number' || typeof event.commitSeq !== 'number') continue;
    const list = points.get(event.walGeneration) ?? [];
    list.push(event.commitSeq);
    points.set(event.walGeneration, list);
  }
  return points;
}

/**
 * What breaks the mapping, one message per pair of restores at fault:
 * a later backupd commit holding an older writer commit (any generations),
 * and, inside one generation (`generationOf` a manifest key), backupd
 * commits not one writer commit apart each, or at least one apart across a
 * continuation point in `continued`.
 */
export function commitMappingViolations(
  restores: readonly MappedRestore[],
  generationOf: ReadonlyMap<string, number | undefined>,
  continued: ReadonlyMap<number, readonly number[]>,
): string[] {
  const violations: string[] = [];
  const mapped = [...restores].sort((a, b) => a.commitSeq - b.commitSeq);
  for (let index = 1; index < mapped.length; index += 1) {
    const before = mapped[index - 1]!;
    const after = mapped[index]!;
    if (after.writerCommit < before.writerCommit)
      violations.push(
        `backupd commit ${after.commitSeq} (${after.manifestKey}) holds writer commit ${after.writerCommit}, older than backupd commit ${before.commitSeq}'s (${before.manifestKey}) writer commit ${before.writerCommit}`,
      );
  }
  for (const before of mapped)
    for (const after of mapped) {
      if (after.commitSeq <= before.commitSeq) continue;
      const generation = generationOf.get(before.manifestKey);
      if (generation === undefined || generationOf.get(after.manifestKey) !== generation) continue;
      const writerApart = after.writerCommit - before.writerCommit;
      const backupdApart = after.commitSeq - before.commitSeq;
      const acrossContinuation = (continued.get(generation) ?? []).some(
        (at) => before.commitSeq <= at && at < after.commitSeq,
      );
      if (acrossContinuation ? writerApart < backupdApart : writerApart !== backupdApart)
        violations.push(
          `inside WAL generation ${generation}, backupd commits ${before.commitSeq} and ${after.commitSeq} hold writer commits ${before.writerCommit} and ${after.writerCommit}: not one writer commit per backupd commit${acrossContinuation ? ' (across a continued restart: at least one)' : ''}`,
        );
    }
  return violations;
}

/**
 * The check must be able to fail: run it on made-up restores, clean ones and
 * broken ones, with and without a continuation point, before trusting what
 * it says about the real ones.
 */
export function selfTestCommitMapping(): string | null {
  const generationOf = new Map([
    ['m/1', 4],
    ['m/2', 4],
    ['m/3', 4],
    ['m/4', 5],
  ]);
  const at = (commitSeq: number, manifestKey: string, writerCommit: number): MappedRestore => ({
    commitSeq,
    manifestKey,
    writerCommit,
  });
  const none = new Map<number, number[]>();
  // backupd 10 → 12 is writer 100 → 102, one to one; generation 5 starts afresh.
  const clean = [at(10, 'm/1', 100), at(12, 'm/2', 102), at(20, 'm/4', 150)];
  if (commitMappingViolations(clean, generationOf, none).length !== 0)
    return 'the commit mapping check flags a clean mapping';
  // Writer 100 → 105 over backupd 10 → 12: three commits not shipped apart.
  const gap = [at(10, 'm/1', 100), at(12, 'm/2', 105)];
  if (commitMappingViolations(gap, generationOf, none).length !== 1)
    return 'the commit mapping check misses writer commits merged into one backupd commit';
  const continuedAt11 = continuationPointsOf([
    'not json "backup.generation_continued"',
    JSON.stringify({ event: 'backup.generation_continued', walGeneration: 4, commitSeq: 11 }),
    JSON.stringify({ event: 'backup.restore_point_written', walGeneration: 4, commitSeq: 3 }),
  ]);
  if (continuedAt11.get(4)?.join() !== '11' || continuedAt11.size !== 1)
    return 'the commit mapping check misreads continuation events';
  if (commitMappingViolations(gap, generationOf, continuedAt11).length !== 0)
    return 'the commit mapping check flags commits merged across a continued restart';
  // A continuation before both restores excuses nothing between them.
  const after = [at(12, 'm/2', 102), at(14, 'm/3', 110)];
  if (commitMappingViolations(after, generationOf, continuedAt11).length !== 1)
    return 'the commit mapping check excuses a gap after a continuation point';
  // Across the point the writer may be ahead, never behind.
  const behind = [at(10, 'm/1', 100), at(13, 'm/3', 101)];
  if (commitMappingViolations(behind, generationOf, continuedAt11).length !== 1)
    return 'the commit mapping check misses backupd commits without a writer commit each';
  const backwards = [at(12, 'm/2', 102), at(20, 'm/4', 90)];
  if (commitMappingViolations(backwards, generationOf, none).length !== 1)
    return 'the commit mapping check misses a later backupd commit holding an older writer commit';
  return null;
}
