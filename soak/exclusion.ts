/**
 * Proves, from the proxy's write log (what reached the server and changed the
 * bucket, as seen on the wire, not what the processes say about themselves),
 * that two backupd processes never both wrote.
 *
 * Every process incarnation talks to the proxy through its own port, so each
 * write carries the tag of the incarnation that sent it ("A1", "B3", …). The
 * log gives, per write, when the request reached the proxy (`startedAt`) and
 * when the server's answer came back (`time`); the server applied it at some
 * moment between the two.
 *
 * Tenures. The lease object (`<prefix>/LEASE`) is written only by its holder
 * (acquire, renew, release), conditionally on the version it last saw, so the
 * successful lease writes form one sequence in time, and the caller of the
 * latest one is the holder as far as the bucket is concerned. A lease write
 * by a caller other than the previous lease writer is a lease acquisition
 * (a takeover); X's tenure runs from X's acquiring write until the next lease
 * write by someone else.
 *
 * The rule, for every data write D (any write whose key is not the lease) by
 * caller Y: let L be the last lease write whose answer came back before D
 * reached the proxy (so the server certainly applied L before D). If there is
 * no such L (nobody held the lease), or L's caller is not Y, then D was
 * applied while another caller's tenure was live — after X's last lease write
 * and before any lease-acquiring write of Y's own — and that is a VIOLATION.
 * (A process writes data only after its lease write was answered, so its own
 * acquiring write always comes back before its data writes reach the proxy.)
 *
 * The one ordering the log cannot settle: D arrived at the proxy while
 * another caller's lease write was in flight (L by Y answered before D
 * arrived, a lease write X by someone else arrived before D was answered, and
 * was answered after D arrived). Then D may have been applied just after X's
 * acquisition: a request already under way when the holder's fence fell.
 * The lease documents that such a request still completes; the lease's
 * margin (holders stop two thirds of a TTL after a renewal, others take over
 * a full TTL after it) exists to keep it from happening. These are reported
 * as OVERLAPS, each with its timings, not as violations.
 */
import type { WriteLogEntry } from '@x/test-faults';

export interface ExclusionFinding {
  readonly write: WriteLogEntry;
  /** The lease write that makes it a finding. */
  readonly lease: WriteLogEntry | null;
  readonly explanation: string;
}

export interface ExclusionReport {
  readonly leaseWrites: number;
  readonly dataWrites: number;
  /** Times the lease writer changed (first acquisition included). */
  readonly acquisitions: number;
  /** Data writes by each caller. */
  readonly writesByCaller: Record<string, number>;
  readonly violations: ExclusionFinding[];
  readonly overlaps: ExclusionFinding[];
}

function describe(entry: WriteLogEntry): string {
  return `#${entry.request} ${entry.caller ?? '(untagged)'} ${entry.method} ${entry.path}${entry.query ? `?${entry.query}` : ''} arrived ${new Date(entry.startedAt).toISOString()} answered ${new Date(entry.time).toISOString()}${entry.lost ? ' (answer lost)' : ''}`;
}

export function describeFinding(finding: ExclusionFinding): string {
  return `${finding.explanation}\n    write: ${describe(finding.write)}\n    lease: ${finding.lease ? describe(finding.lease) : '(none)'}`;
}

/** `leasePath`: the lease object's request path at the proxy, e.g. `/bucket/prefix/LEASE`. */
export function checkExclusion(log: readonly WriteLogEntry[], leasePath: string): ExclusionReport {
  const leases = log.filter((entry) => entry.path === leasePath).sort((a, b) => a.time - b.time);
  const data = log.filter((entry) => entry.path !== leasePath);
  let acquisitions = 0;
  let previousCaller: string | undefined;
  for (const lease of leases) {
    if (lease.caller !== previousCaller) acquisitions += 1;
    previousCaller = lease.caller;
  }
  const writesByCaller: Record<string, number> = {};
  const violations: ExclusionFinding[] = [];
  const overlaps: ExclusionFinding[] = [];
  for (const write of data) {
    const caller = write.caller ?? '(untagged)';
    writesByCaller[caller] = (writesByCaller[caller] ?? 0) + 1;
    // The last lease write certainly applied before this write.
    let before: WriteLogEntry | null = null;
    for (const lease of leases) {
      if (lease.time < write.startedAt) before = lease;
      else break;
    }
    if (before === null || before.caller !== write.caller) {
      violations.push({
        write,
        lease: before,
        explanation:
          before === null
            ? `VIOLATION: ${caller} wrote before anyone held the lease`
            : `VIOLATION: ${caller} wrote during ${before.caller}'s tenure (after ${before.caller}'s lease write, with no lease write of ${caller}'s own in between)`,
      });
      continue;
    }
    const rival = leases.find(
      (lease) =>
        lease.caller !== write.caller &&
        lease.startedAt < write.time &&
        lease.time >= write.startedAt,
    );
    if (rival) {
      overlaps.push({
        write,
        lease: rival,
        explanation: `OVERLAP: ${caller}'s write was in flight while ${rival.caller} wrote the lease (order on the server unknown)`,
      });
    }
  }
  return {
    leaseWrites: leases.length,
    dataWrites: data.length,
    acquisitions,
    writesByCaller,
    violations,
    overlaps,
  };
}

/**
 * The check must be able to fail: run it on made-up logs, one clean and
 * three broken, before trusting what it says about the real one.
 */
export function selfTestExclusion(): string | null {
  const path = '/b/p/LEASE';
  let request = 0;
  const entry = (caller: string, key: string, startedAt: number, time: number): WriteLogEntry => {
    request += 1;
    return {
      request,
      startedAt,
      time,
      method: 'PUT',
      path: key,
      query: '',
      status: 200,
      caller,
      lost: false,
    };
  };
  const clean = [
    entry('A1', path, 0, 10),
    entry('A1', '/b/p/wal/1', 20, 30),
    entry('A1', path, 40, 50),
    entry('B1', path, 4000, 4010),
    entry('B1', '/b/p/wal/2', 4020, 4030),
  ];
  const cleanReport = checkExclusion(clean, path);
  if (cleanReport.violations.length !== 0 || cleanReport.overlaps.length !== 0)
    return 'the exclusion check flags a clean log';
  if (cleanReport.acquisitions !== 2) return 'the exclusion check miscounts acquisitions';
  const stale = [...clean, entry('A1', '/b/p/wal/3', 4040, 4050)];
  if (checkExclusion(stale, path).violations.length !== 1)
    return 'the exclusion check misses a write by the previous holder after a takeover';
  const early = [entry('A1', '/b/p/wal/1', 0, 5), ...clean];
  if (checkExclusion(early, path).violations.length !== 1)
    return 'the exclusion check misses a write before any lease';
  const inFlight = [...clean, entry('A1', '/b/p/wal/9', 3990, 4015)];
  if (checkExclusion(inFlight, path).overlaps.length !== 1)
    return 'the exclusion check misses a write in flight during a takeover';
  return null;
}
