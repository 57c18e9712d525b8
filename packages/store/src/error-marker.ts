/**
 * Markers that let typed errors be recognised across copies of a package
 * (two versions, or one bundled twice), where `instanceof` fails because each
 * copy has its own classes. A marker is a `Symbol.for` symbol, global to the
 * process: each error class sets its own and its base classes' in the
 * constructor, and its `static isInstance` looks for it.
 *
 * The string `${namespace}.${Name}` (namespace `x.<package>.error`, or
 * `x.<package>.<area>.error`) is a contract between copies: never change a
 * released one, and never give two classes the same one.
 */

/** The marker of error class `name` in `namespace`, e.g. `errorMarker('x.store.error', 'StoreError')`. */
export function errorMarker(namespace: string, name: string): symbol {
  return Symbol.for(`${namespace}.${name}`);
}

/** Marks `target` (normally `this`, in a constructor) as carrying `marker`. */
export function markError(target: object, marker: symbol): void {
  (target as Record<symbol, boolean>)[marker] = true;
}

/** True when `value` is an object that carries `marker`, whichever copy of the package made it. */
export function hasErrorMarker(value: unknown, marker: symbol): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Record<symbol, unknown>)[marker] === true
  );
}
