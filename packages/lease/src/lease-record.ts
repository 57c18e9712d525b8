/**
 * The type of the LEASE object's contents, alone in a module that imports
 * nothing, so that the errors (which describe a holder) and the record's
 * parser (which throws those errors) can both use it without importing each
 * other.
 */

/** The contents of `{prefix}/LEASE`. Times are wall-clock ms since the epoch, by the writer's clock. */
export interface LeaseRecord {
  /** The holder's stable id across attempts (see `newInstanceId`). */
  readonly instanceId: string;
  /** When this holder's tenure began. */
  readonly acquiredAt: number;
  /** When the write of this record was sent (the grant is anchored there). */
  readonly renewedAt: number;
  /** The holder's TTL: nobody may take over before `renewedAt + ttlSeconds` by their clock. */
  readonly ttlSeconds: number;
  /** Fencing token: one higher on every new tenure, never lower on a prefix. */
  readonly generation: number;
  /** Optional cluster term the lease was taken under (term fencing). */
  readonly term?: number;
  /** For people: which machine and process holds it. */
  readonly host: string;
  readonly pid: number;
  /** Unique per write, so two writes never produce identical bytes (or ETags). */
  readonly nonce: string;
  /** True when the holder released it: the prefix is free, and the generation is remembered. */
  readonly released?: boolean;
}
