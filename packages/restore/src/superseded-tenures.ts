/** A restore point's place in its lineage's history, as its manifest says. */
export interface TenureStamp {
  readonly key: string;
  readonly lineage: string;
  readonly commitSeq: number;
  /** The lease generation its writer held (manifest version 3); `null` or absent: not recorded. */
  readonly leaseGeneration?: number | null;
}

/** A restore point written by a lease tenure after a later tenure had written one of its own. */
export interface SupersededTenure {
  readonly leaseGeneration: number;
  /** The later tenure's generation, and its restore point at a lower commit. */
  readonly successorGeneration: number;
  readonly successorKey: string;
}

/**
 * The restore points whose writer's lease had already been taken over when
 * they were written: within one lineage, a restore point of lease
 * generation g at commit c while a restore point of a higher generation
 * exists at a commit below c. A fenced writer never writes after its
 * successor did, so each of these is a second writer on the prefix (a
 * store that ignored a precondition, or a lease bypassed): the history
 * forked there. Restore points without a recorded generation are skipped.
 */
export function supersededTenures(stamps: readonly TenureStamp[]): Map<string, SupersededTenure> {
  const found = new Map<string, SupersededTenure>();
  const byLineage = new Map<string, TenureStamp[]>();
  for (const stamp of stamps) {
    if (stamp.leaseGeneration === null || stamp.leaseGeneration === undefined) continue;
    const list = byLineage.get(stamp.lineage) ?? [];
    list.push(stamp);
    byLineage.set(stamp.lineage, list);
  }
  for (const list of byLineage.values()) {
    list.sort((a, b) => a.commitSeq - b.commitSeq);
    let newest: TenureStamp | null = null;
    let index = 0;
    while (index < list.length) {
      // Restore points at one commit are compared with those below it only.
      let end = index;
      while (end < list.length && list[end]!.commitSeq === list[index]!.commitSeq) end += 1;
      for (const stamp of list.slice(index, end))
        if (newest !== null && stamp.leaseGeneration! < newest.leaseGeneration!)
          found.set(stamp.key, {
            leaseGeneration: stamp.leaseGeneration!,
            successorGeneration: newest.leaseGeneration!,
            successorKey: newest.key,
          });
      for (const stamp of list.slice(index, end))
        if (newest === null || stamp.leaseGeneration! > newest.leaseGeneration!) newest = stamp;
      index = end;
    }
  }
  return found;
}

/** One line naming a superseded restore point's writer and its successor. */
export function supersededMessage(superseded: SupersededTenure): string {
  return `written by lease generation ${superseded.leaseGeneration} after generation ${superseded.successorGeneration} had written ${superseded.successorKey}: two writers wrote this prefix, and its history forks here`;
}
