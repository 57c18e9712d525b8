/**
 * Watching the replicas for refusals that no retry can clear (a service
 * that ignores preconditions, a prefix of another lineage): the worker
 * reports them in its health (`refusal`); this turns the first one seen into
 * one call, so that `replicate` can stop with a code that says so instead of
 * idling unhealthy until a SIGTERM makes it exit 0.
 */
import type { PermanentRefusal } from '@x/backup-worker';

export interface ReplicaRefusal extends PermanentRefusal {
  readonly database: string;
  readonly replica: string;
}

/** What is watched: the daemon's replicas with their health's refusal. */
export type RefusalSource = () => readonly {
  readonly database: string;
  readonly replica: string;
  readonly refusal?: PermanentRefusal;
}[];

/** How often the replicas are looked at: refusals come from steps of a second or more. */
export const REFUSAL_POLL_MS = 500;

/**
 * Calls `onRefused` once, with the first refusal found, looking every
 * `REFUSAL_POLL_MS`. Returns a function that stops watching (idempotent).
 * The timer does not keep the process alive.
 */
export function watchRefusals(
  replicas: RefusalSource,
  onRefused: (refusal: ReplicaRefusal) => void,
  pollMs: number = REFUSAL_POLL_MS,
): () => void {
  const timer = setInterval(() => {
    for (const replica of replicas()) {
      if (replica.refusal === undefined) continue;
      clearInterval(timer);
      onRefused({ database: replica.database, replica: replica.replica, ...replica.refusal });
      return;
    }
  }, pollMs);
  timer.unref();
  return () => clearInterval(timer);
}
