import { MemoryStore } from '@x/store';
import { describe, expect, it } from 'vitest';
import { InstrumentedStore } from './instrumented-store.ts';
import type { ReplicaStatus } from './status.ts';
import { renderStatusPage } from './status-page.ts';

const SOURCE = { statuses: () => [], version: '0.1.0', startedAt: 0 };

function status(overrides: Partial<ReplicaStatus>): ReplicaStatus {
  return {
    database: '/data/app.db',
    replica: 's3://bucket/app',
    healthy: true,
    lagSeconds: 0,
    unshippedBytes: 0,
    unrestorableCommits: 0,
    lastSuccessSeconds: 0,
    errors: 0,
    leaseHeld: true,
    requests: new InstrumentedStore(new MemoryStore()).counters,
    ...overrides,
  };
}

/** The text of the "Latest restore point" cell (the seventh). */
function latestCell(page: string): string {
  const cells = [...page.matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((match) => match[1]!);
  return cells[6]!;
}

describe('the status page: latest restore point', () => {
  it('shows the restore point the worker checked', () => {
    const page = renderStatusPage(
      [
        status({
          latestRestorePoint: { commitSeq: 42, key: 'app/manifest/00000000000000000042.json' },
        }),
      ],
      SOURCE,
    );
    expect(latestCell(page)).toBe('commit 42');
  });

  it('with none and no refusal: none yet', () => {
    expect(latestCell(renderStatusPage([status({})], SOURCE))).toBe('none yet');
  });

  it('refused with no usable restore point (a corrupt LATEST nothing heals): none usable, not none yet', () => {
    const reason =
      'LATEST names app/manifest/00000000000000000042.json, which does not parse: …, and there is no manifest under app/manifest/ to point it at: there is no restore point to resume from';
    const page = renderStatusPage(
      [status({ healthy: false, reason, refusal: { kind: 'lineage', reason } })],
      SOURCE,
    );
    expect(latestCell(page)).toContain('none usable');
    expect(latestCell(page)).not.toContain('commit 42');
    expect(page).toContain('there is no restore point to resume from');
  });
});

/** The cells of the first row, by header. */
function cellsByHeader(page: string): Record<string, string> {
  const headers = [...page.matchAll(/<th>(.*?)<\/th>/g)].map((match) => match[1]!);
  const cells = [...page.matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((match) => match[1]!);
  return Object.fromEntries(headers.map((header, index) => [header, cells[index]!]));
}

describe('the status page: what an operator needs to act', () => {
  const now = Date.parse('2026-12-01T12:00:00Z');

  it('shows the latest restore point with its age, the restorable window, file sizes, bytes shipped and both error counts', () => {
    const requests = new InstrumentedStore(new MemoryStore()).counters as unknown as Record<
      string,
      { requests: number; errors: number; bytesIn: number; bytesOut: number }
    >;
    requests.put = { requests: 10, errors: 2, bytesIn: 0, bytesOut: 3 * 1024 * 1024 };
    requests.upload = { requests: 1, errors: 0, bytesIn: 0, bytesOut: 1024 * 1024 };
    const cells = cellsByHeader(
      renderStatusPage(
        [
          status({
            latestRestorePoint: {
              commitSeq: 420,
              key: 'app/manifest/00000000000000000420.json',
              createdAt: '2026-12-01T11:59:48Z',
            },
            oldestRestorePoint: {
              commitSeq: 100,
              restorableFrom: 90,
              createdAt: '2026-11-30T12:00:00Z',
            },
            restorePoints: 24,
            engine: { databaseBytes: 2_400_256, walBytes: 4_194_304 },
            requests: requests as unknown as ReplicaStatus['requests'],
            errors: 1,
          }),
        ],
        SOURCE,
        now,
      ),
    );
    expect(cells['Latest restore point']).toBe(
      'commit 420, 12s ago<br><small>2026-12-01T11:59:48Z</small>',
    );
    expect(cells['Restorable window']).toBe(
      'commits 90–420<br><small>since 2026-11-30T12:00:00Z · 24 restore points</small>',
    );
    expect(cells.Database).toBe('2.3 MiB<br><small>WAL 4.0 MiB</small>');
    expect(cells.Shipped).toBe('4.0 MiB');
    expect(cells.Errors).toBe('1 failed steps<br><small>2 failed requests</small>');
  });

  it('unhealthy: the reason, and the last error when the reason does not carry it', () => {
    const cells = cellsByHeader(
      renderStatusPage(
        [
          status({
            healthy: false,
            reason: 'the bucket lease could not be renewed; uploads are stopped until it is',
            lastError: 'connect ECONNREFUSED 127.0.0.1:9',
          }),
        ],
        SOURCE,
        now,
      ),
    );
    expect(cells.Health).toContain('the bucket lease could not be renewed');
    expect(cells.Health).toContain('last error: connect ECONNREFUSED 127.0.0.1:9');
  });
});
