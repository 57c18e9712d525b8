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
