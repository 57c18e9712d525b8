import { describe, expect, it } from 'vitest';
import { cleanupLine, judge } from './check-command.ts';

describe('check: the cleanup line of the summary', () => {
  const base = { prefix: 'scratch/check-1', failures: ['final sweep: AccessDenied'] };

  it('says nothing when the scratch prefix was cleaned', () => {
    expect(cleanupLine({ ...base, clean: true, left: 0, listed: true, failures: [] })).toBe(
      undefined,
    );
  });

  it('counts what a listing found left', () => {
    expect(cleanupLine({ ...base, clean: false, left: 2, listed: true })).toBe(
      'cleanup FAILED: 2 objects left under scratch/check-1/; delete that prefix by hand',
    );
  });

  it('gives a lower bound when the listing failed part way', () => {
    expect(cleanupLine({ ...base, clean: false, left: 1, listed: false })).toBe(
      'cleanup FAILED: at least 1 object left under scratch/check-1/ (the prefix could not be listed: more may be there); delete that prefix by hand',
    );
  });

  it('never says "at least 0 objects": an unlisted prefix is named as unknown', () => {
    const line = cleanupLine({ ...base, clean: false, left: 0, listed: false });
    expect(line).toBe(
      'cleanup FAILED: scratch/check-1/ could not be listed, so objects may be left there; check it and delete that prefix by hand',
    );
    expect(line).not.toContain('at least 0');
  });
});

describe('check: the verdict', () => {
  const honoured = { outcome: 'honoured', evidence: 'refused as it should' } as const;
  const probe = { create: honoured, replace: honoured, delete: honoured };
  const clean = { clean: true, prefix: 'scratch/x', left: 0, listed: true, failures: [] };
  const passed = {
    group: 'races',
    name: 'a race',
    outcome: 'passed',
    detail: '',
    durationMs: 1,
  } as const;

  it('is SAFE when the probe finds both preconditions honoured and every case passed', () => {
    const verdict = judge('s3://b/p', probe, [passed], clean);
    expect(verdict).toMatchObject({ safe: true, exclusion: 'conditional' });
    expect(verdict.summary).toMatch(/^s3:\/\/b\/p: SAFE/);
  });

  it('is UNSAFE when a conformance case failed, however the probe went, naming the count and BACKUPD_CONDITIONAL', () => {
    const failed = {
      ...passed,
      name: '5 workers × 10 read-modify-write increments',
      outcome: 'failed',
      detail: 'expected "50" at counter, found "45"',
    } as const;
    const verdict = judge('s3://b/p', probe, [passed, failed], clean);
    expect(verdict).toMatchObject({ safe: false, exclusion: 'none' });
    expect(verdict.summary).toContain('UNSAFE — 1 conformance case failed');
    expect(verdict.summary).toContain('BACKUPD_CONDITIONAL=off');
  });
});

describe('check: a failed conditional-delete case', () => {
  it('does not make the service UNSAFE: backupd never deletes conditionally', () => {
    const honoured = { outcome: 'honoured', evidence: '' } as const;
    const failed = {
      group: 'delete',
      name: 'conditional delete with a stale version',
      outcome: 'failed',
      detail: 'it succeeded',
      durationMs: 1,
    } as const;
    const verdict = judge(
      's3://b/p',
      { create: honoured, replace: honoured, delete: { outcome: 'ignored', evidence: '' } },
      [failed],
      { clean: true, prefix: 'p', left: 0, listed: true, failures: [] },
    );
    expect(verdict.safe).toBe(true);
  });
});
