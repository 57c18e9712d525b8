/**
 * The status page: one table, server-rendered, every value HTML-escaped.
 * Per replica: health with its reason (and the last error while steps
 * fail), lag, the last success, the lease, the latest restore point with its
 * age, the restorable window (the oldest kept restore point to the latest),
 * the database and WAL size, bytes shipped, and failed steps beside failed
 * requests (the same counters `/metrics` exposes).
 */
import { formatBytes } from './format-bytes.ts';
import type { ReplicaStatus, StatusSource } from './status.ts';

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

function ago(unixSeconds: number, now: number): string {
  if (unixSeconds === 0) return 'never';
  const seconds = Math.max(0, Math.round(now / 1000 - unixSeconds));
  return seconds < 120 ? `${seconds}s ago` : `${Math.round(seconds / 60)}m ago`;
}

/** Seconds since an RFC 3339 time, as "12s ago" / "5m ago" / "3h ago"; `''` when it does not parse. */
function ageOf(rfc3339: string, now: number): string {
  const at = Date.parse(rfc3339);
  if (Number.isNaN(at)) return '';
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 120) return `${seconds}s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m ago`;
  return `${Math.round(seconds / 3600)}h ago`;
}

/** Sums of the request counters over every operation: what the page and /metrics both count. */
function requestTotals(status: ReplicaStatus): { bytesOut: number; errors: number } {
  let bytesOut = 0;
  let errors = 0;
  for (const counters of Object.values(status.requests ?? {})) {
    bytesOut += counters.bytesOut;
    errors += counters.errors;
  }
  return { bytesOut, errors };
}

function row(status: ReplicaStatus, now: number): string {
  // The reason carries the last error when steps keep failing; the last
  // error is shown on its own only when the reason does not already say it.
  const lastError =
    status.lastError && !(status.reason ?? '').includes(status.lastError)
      ? `<br><small>last error: ${escapeHtml(status.lastError)}</small>`
      : '';
  const health = status.healthy
    ? `<span class="ok">healthy</span>${lastError}`
    : `<span class="bad">unhealthy</span><br><small>${escapeHtml(status.reason ?? '')}</small>${lastError}`;
  const lease = status.follow
    ? 'follower (takes none)'
    : status.directory
      ? `${status.directory.awake} of ${status.directory.databases} databases awake (each holds its lease)<br><small>${status.directory.asleep} asleep · ${status.directory.inUse} in use elsewhere · ${status.directory.refused} refused · ${status.directory.wakes} wakes</small>`
      : status.leaseHeld
        ? 'held by this process'
        : status.leaseHolder
          ? `held by ${escapeHtml(status.leaseHolder)}`
          : 'not held';
  // The worker names only a restore point it read and checked (a corrupt one
  // LATEST happens to name is never shown as the latest). Without one and
  // refused for good, there is none usable, not "none yet".
  const point = status.latestRestorePoint;
  const latest = status.follow
    ? `shows commit ${status.follow.appliedCommitSeq}<br><small>${status.follow.commitsBehind} commits behind · ${status.follow.statesApplied} states applied</small>`
    : point
      ? `commit ${point.commitSeq}${point.createdAt ? `, ${ageOf(point.createdAt, now)}<br><small>${escapeHtml(point.createdAt)}</small>` : ''}`
      : status.refusal
        ? '<span class="bad">none usable</span><br><small>see health</small>'
        : 'none yet';
  const oldest = status.oldestRestorePoint;
  const window =
    point && oldest
      ? `commits ${oldest.restorableFrom}–${point.commitSeq}<br><small>since ${escapeHtml(oldest.createdAt)}${status.restorePoints !== undefined ? ` · ${status.restorePoints} restore points` : ''}</small>`
      : point
        ? `up to commit ${point.commitSeq}`
        : '—';
  const engine = status.engine;
  const files = engine
    ? `${engine.databaseBytes === null ? '?' : formatBytes(engine.databaseBytes)}<br><small>WAL ${engine.walBytes === null ? '?' : formatBytes(engine.walBytes)}</small>`
    : '—';
  const totals = requestTotals(status);
  const errors = `${status.errors} failed steps<br><small>${totals.errors} failed requests</small>`;
  return `<tr><td>${escapeHtml(status.database)}</td><td>${escapeHtml(status.replica)}</td><td>${health}</td><td class="lag">${status.lagSeconds}s</td><td>${ago(status.lastSuccessSeconds, now)}</td><td>${lease}</td><td class="latest">${latest}</td><td class="window">${window}</td><td class="files">${files}</td><td class="shipped">${formatBytes(totals.bytesOut)}</td><td class="errors">${errors}</td></tr>`;
}

/** How many of a directory's databases the page lists: the worst, or those a search found. */
export const PAGE_DATABASES = 20;

/** A directory's databases: the worst by lag, or those whose path holds the search. */
function databasesSection(source: StatusSource, search: string): string {
  if (!source.databases) return '';
  const rows = source.databases({ search, limit: PAGE_DATABASES });
  const title =
    search === ''
      ? `The directories' databases, worst lag first (${rows.length} shown)`
      : `Databases whose path holds "${escapeHtml(search)}" (${rows.length} shown, at most ${PAGE_DATABASES})`;
  const cell = (value: number | null) => (value === null ? '—' : String(value));
  return `<h2>${title}</h2>
<form method="get" action="/"><input name="q" value="${escapeHtml(search)}" placeholder="search a database"> <button>search</button></form>
<table><thead><tr><th>Database</th><th>State</th><th>Lag (s)</th><th>Unshipped bytes</th><th>Latest restore point</th><th>Last change seen</th><th>Backup</th></tr></thead>
<tbody>${rows
    .map(
      (row) =>
        `<tr><td>${escapeHtml(row.database)}<br><small>${escapeHtml(row.directory)}</small></td><td>${escapeHtml(row.state)}${row.problem ? `<br><small>${escapeHtml(row.problem)}</small>` : ''}</td><td>${cell(row.lagSeconds)}</td><td>${cell(row.unshippedBytes)}</td><td>${row.latestCommitSeq === null ? '—' : `commit ${row.latestCommitSeq}`}</td><td>${escapeHtml(row.changedAt)}</td><td>${escapeHtml(row.url)}</td></tr>`,
    )
    .join('\n')}</tbody></table>`;
}

export function renderStatusPage(
  statuses: readonly ReplicaStatus[],
  source: StatusSource,
  now = Date.now(),
  search = '',
): string {
  const healthy = statuses.length > 0 && statuses.every((status) => status.healthy);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta http-equiv="refresh" content="5">
<title>backupd — ${healthy ? 'healthy' : 'attention needed'}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #ddd;padding:.4rem .6rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}.ok{color:#17702f;font-weight:600}.bad{color:#b00020;font-weight:600}small{color:#666}
</style></head><body>
<h1>backupd <small>${escapeHtml(source.version)}</small></h1>
<p>Overall: ${healthy ? '<span class="ok">healthy</span>' : '<span class="bad">attention needed</span>'} · up since ${new Date(source.startedAt).toISOString()} · refreshes every 5 s</p>
<table><thead><tr><th>Database</th><th>Replica</th><th>Health</th><th>Lag</th><th>Last success</th><th>Lease</th><th>Latest restore point</th><th>Restorable window</th><th>Database</th><th>Shipped</th><th>Errors</th></tr></thead>
<tbody>${statuses.map((status) => row(status, now)).join('\n')}</tbody></table>
${databasesSection(source, search)}
</body></html>
`;
}
