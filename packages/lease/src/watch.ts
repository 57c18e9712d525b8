/**
 * A contender's memory of a suspect foreign record across acquire attempts.
 *
 * A record renewed more than its own TTL in the future, or with a TTL over
 * `MAX_SANE_TTL_S`, would block the prefix for as long as its writer's clock
 * is wrong. A contender that sees the *same version* of such a record
 * unchanged for one of its own TTLs, measured on its own monotonic clock,
 * may take it over. Any change to the object (a live holder renewing it)
 * restarts the watch.
 *
 * Pass one `LeaseWatch` to every `acquireAs` of one contender; `holdLease`
 * callers that retry do the same.
 */
import { type ObjectVersion, sameVersion } from '@x/store';

export class LeaseWatch {
  #key: string | undefined;
  #version: ObjectVersion | undefined;
  #sinceMonotonicMs: number | undefined;

  /** The version being watched, if any. */
  get version(): ObjectVersion | undefined {
    return this.#version;
  }

  /** When (monotonic ms) this version was first seen, if any. */
  get sinceMonotonicMs(): number | undefined {
    return this.#sinceMonotonicMs;
  }

  /** Forgets what was seen. */
  reset(): void {
    this.#key = undefined;
    this.#version = undefined;
    this.#sinceMonotonicMs = undefined;
  }

  /**
   * Records that `version` of `key` was seen (suspect) at `monotonicMs`.
   * @returns how long (ms) this exact version has been seen unchanged, 0 when it is new.
   */
  observe(key: string, version: ObjectVersion, monotonicMs: number): number {
    if (
      this.#key !== key ||
      this.#version === undefined ||
      this.#sinceMonotonicMs === undefined ||
      !sameVersion(this.#version, version)
    ) {
      this.#key = key;
      this.#version = version;
      this.#sinceMonotonicMs = monotonicMs;
      return 0;
    }
    return monotonicMs - this.#sinceMonotonicMs;
  }
}
