/** Shared test helpers: recording logger, event waiters, hand-written records. */
import type { ObjectStore } from '@x/store';
import type { LeaseEvent } from '../src/keeper.ts';
import type { LeaseLogger } from '../src/lease-options.ts';
import { type LeaseRecord, leaseKey, serializeLeaseRecord } from '../src/record.ts';

export interface LogEntry {
  level: 'info' | 'warn';
  event: string;
  fields: Record<string, unknown>;
}

export function recordingLogger(): { logger: LeaseLogger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  return {
    entries,
    logger: {
      info: (event, fields) =>
        entries.push({ level: 'info', event, fields: { ...(fields as object) } }),
      warn: (event, fields) =>
        entries.push({ level: 'warn', event, fields: { ...(fields as object) } }),
    },
  };
}

/** Collects keeper events and lets a test wait for the next one of a type. */
interface Waiter {
  readonly type: LeaseEvent['type'];
  readonly resolve: (event: LeaseEvent) => void;
}

export class EventLog {
  readonly events: LeaseEvent[] = [];
  #waiters: Waiter[] = [];

  readonly onEvent = (event: LeaseEvent): void => {
    this.events.push(event);
    const remaining: Waiter[] = [];
    for (const waiter of this.#waiters) {
      if (waiter.type === event.type) waiter.resolve(event);
      else remaining.push(waiter);
    }
    this.#waiters = remaining;
  };

  /** Resolves at the next event of `type` (registered before the action that causes it). */
  next<T extends LeaseEvent['type']>(type: T): Promise<Extract<LeaseEvent, { type: T }>> {
    return new Promise((resolve) => {
      this.#waiters.push({ type, resolve: resolve as (event: LeaseEvent) => void });
    });
  }

  /** Resolves at the next event of any of `types`. */
  nextOf(...types: LeaseEvent['type'][]): Promise<LeaseEvent> {
    return new Promise((resolve) => {
      let done = false;
      for (const type of types)
        this.#waiters.push({
          type,
          resolve: (event) => {
            if (done) return;
            done = true;
            resolve(event);
          },
        });
    });
  }

  types(): string[] {
    return this.events.map((event) => event.type);
  }
}

/** Writes a record by hand (as a foreign instance or an operator would). */
export async function writeRecordByHand(
  store: ObjectStore,
  prefix: string,
  record: Partial<LeaseRecord> & Pick<LeaseRecord, 'renewedAt'>,
): Promise<void> {
  const full: LeaseRecord = {
    instanceId: 'f'.repeat(32),
    acquiredAt: record.renewedAt,
    ttlSeconds: 30,
    generation: 1,
    host: 'elsewhere',
    pid: 4242,
    nonce: Math.random().toString(16).slice(2),
    ...record,
  };
  await store.put(leaseKey(prefix), serializeLeaseRecord(full), { mode: 'overwrite' });
}

/** Lets pending promise callbacks and I/O run (for work started by fake timers). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
