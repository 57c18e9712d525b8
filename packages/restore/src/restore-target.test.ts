import { manifestKey } from '@x/manifest';
import { describe, expect, it } from 'vitest';
import { RestoreOptionsError } from './restore-errors.ts';
import {
  checkTargetOptions,
  type RestoreTarget,
  requestedCommit,
  rollsForward,
} from './restore-target.ts';

const PREFIX = 'db';
const KEY = manifestKey(PREFIX, 7);

/** The option a refusal names, or `undefined` when the options pass. */
function refusedOption(options: object): string | undefined {
  try {
    checkTargetOptions(PREFIX, options);
    return undefined;
  } catch (error) {
    if (!RestoreOptionsError.isInstance(error)) throw error;
    return error.option;
  }
}

describe('restore targets', () => {
  it('cut after the commit asked for; the latest and a bare restore point at their newest', () => {
    expect(requestedCommit({ kind: 'latest' })).toBeUndefined();
    expect(requestedCommit({ kind: 'commit', commitSeq: 3 })).toBe(3);
    expect(requestedCommit({ kind: 'restore-point', manifestKey: KEY })).toBeUndefined();
    expect(requestedCommit({ kind: 'restore-point', manifestKey: KEY, commitSeq: 5 })).toBe(5);
  });

  it('roll forward for the latest state, and for a restore point only when asked', () => {
    expect(rollsForward({ kind: 'latest' })).toBe(true);
    expect(rollsForward({ kind: 'commit', commitSeq: 3 })).toBe(false);
    expect(rollsForward({ kind: 'restore-point', manifestKey: KEY })).toBe(false);
    expect(rollsForward({ kind: 'restore-point', manifestKey: KEY, rollForward: false })).toBe(
      false,
    );
    expect(rollsForward({ kind: 'restore-point', manifestKey: KEY, rollForward: true })).toBe(true);
  });

  it('accepts every well-formed target, and none', () => {
    const targets: RestoreTarget[] = [
      { kind: 'latest' },
      { kind: 'commit', commitSeq: 0 },
      { kind: 'restore-point', manifestKey: KEY },
      { kind: 'restore-point', manifestKey: KEY, commitSeq: 7, rollForward: true },
    ];
    for (const target of targets) expect(refusedOption({ target })).toBeUndefined();
    expect(refusedOption({})).toBeUndefined();
  });

  it('refuses a malformed target naming target, a bad field naming the field', () => {
    expect(refusedOption({ target: { kind: 'manifest', manifestKey: KEY } })).toBe('target');
    expect(refusedOption({ target: { kind: 'restore-point' } })).toBe('target');
    expect(refusedOption({ target: { kind: 'latest', rollForward: true } })).toBe('target');
    expect(refusedOption({ target: { kind: 'commit', commitSeq: 1.5 } })).toBe('target.commitSeq');
    expect(refusedOption({ target: { kind: 'restore-point', manifestKey: 'db/LATEST' } })).toBe(
      'target.manifestKey',
    );
  });

  it('refuses the options target replaced by their old names', () => {
    expect(refusedOption({ manifestKey: KEY })).toBe('manifestKey');
    expect(refusedOption({ commitSeq: 3 })).toBe('commitSeq');
    expect(refusedOption({ rollForward: true })).toBe('rollForward');
  });
});
