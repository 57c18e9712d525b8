/**
 * The mark on an error the store wrapper made up. The wrapper throws the
 * store's own error classes (`StoreError`, `ConflictError`) so code under
 * test handles them as it would real ones; their `cause` is an
 * {@link InjectedFaultError}, so a test can still tell an injected failure
 * from a real one.
 */
import type { FaultKind } from './schedule.ts';

const INJECTED_FAULT_MARKER = Symbol.for('x.test-faults.error.InjectedFaultError');

export class InjectedFaultError extends Error {
  readonly code = 'FAULT_INJECTED';
  readonly kind: FaultKind;

  constructor(kind: FaultKind, message: string) {
    super(message);
    this.name = 'InjectedFaultError';
    this.kind = kind;
    (this as unknown as Record<symbol, boolean>)[INJECTED_FAULT_MARKER] = true;
  }

  static isInstance(value: unknown): value is InjectedFaultError {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[INJECTED_FAULT_MARKER] === true
    );
  }
}

/** The injected kind behind `error` (itself or anywhere in its `cause` chain), or `undefined`. */
export function injectedFaultKind(error: unknown): FaultKind | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 10 && current !== undefined && current !== null; depth += 1) {
    if (InjectedFaultError.isInstance(current)) return current.kind;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
