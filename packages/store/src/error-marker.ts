/**
 * Markers that let typed errors be recognised across copies of a package.
 *
 * When two copies of a package are installed (two versions, or one bundled
 * twice), each has its own class objects, so `instanceof` fails across them.
 * A `Symbol.for` symbol is global to the process, so a marker set by one copy
 * is seen by the other. Each error class sets its marker in its constructor
 * (subclasses set theirs as well as the base class's) and answers its
 * `static isInstance` by looking for it.
 *
 * Namespace rule: the marker of class `Name` is `Symbol.for(`${namespace}.${Name}`)`,
 * where `namespace` is `x.<package>.error` (or `x.<package>.<area>.error` for
 * a sub-area with its own classes). The string is part of the compatibility
 * contract between copies: never change a released one, or older and newer
 * copies stop recognising each other's errors. Two classes must never share
 * a string.
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
