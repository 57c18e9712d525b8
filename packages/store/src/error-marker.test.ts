import { describe, expect, it } from 'vitest';
import { errorMarker, hasErrorMarker, markError } from './error-marker.ts';
import * as storeErrors from './errors.ts';

describe('error markers', () => {
  it('builds the marker from the namespace and the class name, through the global symbol registry', () => {
    expect(errorMarker('x.example.error', 'ExampleError')).toBe(
      Symbol.for('x.example.error.ExampleError'),
    );
  });

  it('recognises a marked object and nothing else', () => {
    const marker = errorMarker('x.example.error', 'ExampleError');
    const other = errorMarker('x.example.error', 'OtherError');
    const target = {};
    expect(hasErrorMarker(target, marker)).toBe(false);
    markError(target, marker);
    expect(hasErrorMarker(target, marker)).toBe(true);
    expect(hasErrorMarker(target, other)).toBe(false);
    for (const value of [undefined, null, 0, 'x.example.error.ExampleError', true]) {
      expect(hasErrorMarker(value, marker)).toBe(false);
    }
    expect(hasErrorMarker({ [marker]: 'yes' }, marker)).toBe(false);
  });

  // The strings are the compatibility contract between two installed copies
  // of this package: an error made by one copy carries only these symbols.
  const released = [
    'AlreadyExistsError',
    'ConflictError',
    'InvalidKeyError',
    'NotFoundError',
    'NotImplementedError',
    'PreconditionFailedError',
    'StoreError',
  ];

  it('lists every error class of x.store.error', () => {
    const classes = Object.entries(storeErrors)
      .filter(([, value]) => typeof value === 'function' && 'isInstance' in value)
      .map(([name]) => name)
      .sort();
    expect(classes).toEqual(released);
  });

  it.each(released)('%s recognises an error from another copy by x.store.error.%s', (name) => {
    const errorClass = (storeErrors as unknown as Record<string, typeof storeErrors.StoreError>)[
      name
    ]!;
    expect(errorClass.isInstance({ [Symbol.for(`x.store.error.${name}`)]: true })).toBe(true);
    expect(errorClass.isInstance({})).toBe(false);
  });

  it('marks an instance with its own and its base class markers', () => {
    const error = new storeErrors.NotFoundError('a/b');
    expect(hasErrorMarker(error, Symbol.for('x.store.error.NotFoundError'))).toBe(true);
    expect(hasErrorMarker(error, Symbol.for('x.store.error.StoreError'))).toBe(true);
    expect(storeErrors.ConflictError.isInstance(error)).toBe(false);
  });
});
