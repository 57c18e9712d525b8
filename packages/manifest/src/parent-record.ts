/**
 * The parent record: the small file a restore leaves beside the restored
 * database (the framed store's `backup.parent`, SQLite's `.<db>-backupd/parent`),
 * naming the lineage and the manifest it came from. The engine's source reads
 * it at its first backup so that the restored database can adopt the prefix
 * it came from (the worker's lineage rules). Written as one line of JSON.
 */
export interface ParentRecord {
  readonly lineage: string;
  /** Full key of the manifest restored from. */
  readonly manifestKey: string;
  readonly commitSeq: number;
}
