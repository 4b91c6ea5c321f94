/**
 * Object copies for code that runs every controller tick. Node 20's V8 takes a slow path for an object
 * that starts as a spread and then gets more properties (`{ ...a, ...b }`, `{ ...a, k: v }`, or
 * `o = { ...a }; o[newKey] = v`): 3-14 µs a call, against 0.05-0.3 µs for `Object.assign` into a
 * fresh object (measured on the dev machine, 2026-11-25; bench/README.md "Simulator speed, session
 * 5"). These give the same object as the spread: the same own enumerable properties (symbols
 * included), in the same order, the later source winning. A source with an own "__proto__" property
 * (JSON.parse makes one) goes through the spread, where `Object.assign` would set the prototype.
 * Internal: not exported from the package.
 */

const hasProto = (o: object): boolean => Object.prototype.hasOwnProperty.call(o, "__proto__");

/** `{ ...base, ...over }`. */
export function merge<T extends object>(base: T, over: Partial<T> | undefined): T {
  if (over === undefined) return copy(base);
  if (hasProto(base) || hasProto(over)) return { ...base, ...over };
  return Object.assign({}, base, over);
}

/** `{ ...o }`, as an object that takes more properties fast. */
export function copy<T extends object>(o: T): T {
  if (hasProto(o)) return { ...o };
  return Object.assign({}, o);
}
