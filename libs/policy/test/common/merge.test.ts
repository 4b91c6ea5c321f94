import { describe, expect, it } from "vitest";
import { copy, merge } from "../../src/common/merge.js";

const sym = Symbol("s");
const withGetter = Object.defineProperty({ a: 1 }, "g", { get: () => 7, enumerable: true });
const hidden = Object.defineProperty({ a: 1 }, "h", { value: 2, enumerable: false });

/** Own keys (strings then symbols, in order) and values: what a spread defines. */
const shape = (o: object): Array<[string | symbol, unknown]> => Reflect.ownKeys(o).map((k) => [k, (o as Record<string | symbol, unknown>)[k]]);

describe("merge", () => {
  const cases: Array<{ name: string; base: object; over: object | undefined }> = [
    { name: "over undefined copies base", base: { a: 1, b: 2 }, over: undefined },
    { name: "later source wins, order of the first", base: { a: 1, b: 2, c: 3 }, over: { b: 20, d: 4 } },
    { name: "empty over", base: { a: 1 }, over: {} },
    { name: "Infinity and nested objects by reference", base: { max: Infinity, byKind: { gpu: 1 } }, over: { min: 0 } },
    { name: "symbol keys", base: { a: 1, [sym]: "x" }, over: { b: 2 } },
    { name: "getter read, not copied as a getter", base: withGetter, over: { b: 2 } },
    { name: "non-enumerable left out", base: hidden, over: { b: 2 } },
    { name: "own __proto__ from JSON stays a property", base: { a: 1 }, over: JSON.parse('{"__proto__": {"polluted": true}, "b": 2}') as object },
    { name: "own __proto__ in base", base: JSON.parse('{"__proto__": {"x": 1}, "a": 1}') as object, over: { a: 2 } },
  ];
  for (const c of cases) {
    it(`merge - ${c.name}`, () => {
      const got = merge<object>(c.base, c.over);
      const want = { ...c.base, ...(c.over ?? {}) };
      expect(shape(got)).toEqual(shape(want));
      expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
      expect(got).not.toBe(c.base);
    });
  }

  it("copy - the same own enumerable properties, a new object, the prototype untouched", () => {
    for (const o of [{ a: 1, b: 2 }, { a: 1, [sym]: 2 }, withGetter, JSON.parse('{"__proto__": {"x": 1}, "a": 1}') as object]) {
      const got = copy(o);
      expect(shape(got)).toEqual(shape({ ...o }));
      expect(got).not.toBe(o);
      expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
    }
  });
});
