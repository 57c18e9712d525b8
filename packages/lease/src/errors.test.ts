import { describe, expect, it } from 'vitest';
import * as leaseErrors from './errors.ts';

// The marker strings are the compatibility contract between two installed
// copies of this package: an error made by one copy carries only its
// `x.lease.error.<class>` symbol, so each class must go on recognising it.
const released = [
  'FencedError',
  'ForeignActiveError',
  'LeaseError',
  'LeaseLostError',
  'LeaseOptionsError',
  'LeaseRecordError',
  'LeaseWaitTimeoutError',
  'PreconditionsIgnoredError',
  'WriteDeadlineError',
] as const;

// Looked up by name, so the list above is checked against the module's exports.
const errorClasses = leaseErrors as unknown as Record<
  string,
  { isInstance(value: unknown): boolean }
>;

describe('lease error markers', () => {
  it('cover every exported error class', () => {
    const exported = Object.keys(errorClasses).filter((name) => name.endsWith('Error'));
    expect(exported.sort()).toEqual([...released]);
  });

  it.each(released)('%s recognises an error from another copy by x.lease.error.%s', (name) => {
    const marked = { [Symbol.for(`x.lease.error.${name}`)]: true };
    expect(errorClasses[name]!.isInstance(marked)).toBe(true);
    expect(errorClasses[name]!.isInstance({})).toBe(false);
  });
});
