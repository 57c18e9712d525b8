/** The status page: one table, server-rendered, every value HTML-escaped. */
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

function row(status: ReplicaStatus, now: number): string {
  const health = status.healthy
    ? '<span class="ok">healthy</span>'
    : `<span class="bad">unhealthy</span><br><small>${escapeHtml(status.reason ?? '')}</small>`;
  const lease = status.leaseHeld
    ? 'held by this process'
    : status.leaseHolder
      ? `held by ${escapeHtml(status.leaseHolder)}`
      : 'not held';
  // The worker names only a restore point it read and checked (a corrupt one
  // LATEST happens to name is never shown as the latest). Without one and
  // refused for good, there is none usable, not "none yet".
  const latest = status.latestRestorePoint
    ? `commit ${status.latestRestorePoint.commitSeq}${status.latestRestorePoint.createdAt ? ` <small>(${escapeHtml(status.latestRestorePoint.createdAt)})</small>` : ''}`
    : status.refusal
      ? '<span class="bad">none usable</span><br><small>see health</small>'
      : 'none yet';
  return `<tr><td>${escapeHtml(status.database)}</td><td>${escapeHtml(status.replica)}</td><td>${health}</td><td class="lag">${status.lagSeconds}s</td><td>${ago(status.lastSuccessSeconds, now)}</td><td>${lease}</td><td>${latest}</td><td>${status.restorePoints ?? '—'}</td><td>${status.errors}</td></tr>`;
}

export function renderStatusPage(
  statuses: readonly ReplicaStatus[],
  source: StatusSource,
  now = Date.now(),
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
<table><thead><tr><th>Database</th><th>Replica</th><th>Health</th><th>Lag</th><th>Last success</th><th>Lease</th><th>Latest restore point</th><th>Restore points</th><th>Errors</th></tr></thead>
<tbody>${statuses.map((status) => row(status, now)).join('\n')}</tbody></table>
</body></html>
`;
}
