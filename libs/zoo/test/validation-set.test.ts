import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeValidationSet, encodeValidationSet, readValidationSet, validationSetFromJson, validationSetToJson } from "../src/validation-set.js";

const set = { count: 3, features: 2, inputs: Float32Array.from([0, 0.25, 0.5, 0.75, 1, 0.125]), labels: Uint8Array.from([7, 0, 9]) };

describe("zoo - validation set files", () => {
  it("zoo - binary layout is header, float32 inputs, uint8 labels", () => {
    const bytes = encodeValidationSet(set);
    expect(bytes.length).toBe(8 + 6 * 4 + 3);
    const view = new DataView(bytes.buffer);
    expect([view.getUint32(0, true), view.getUint32(4, true)]).toEqual([3, 2]);
    expect(view.getFloat32(8 + 3 * 4, true)).toBe(0.75);
    expect(Array.from(bytes.subarray(32))).toEqual([7, 0, 9]);
  });

  it("zoo - round-trips through a file and through JSON", async () => {
    const dir = await mkdtemp(join(tmpdir(), "zoo-vs-"));
    try {
      await writeFile(join(dir, "m.validation.bin"), encodeValidationSet(set));
      const read = await readValidationSet(join(dir, "m.validation.bin"));
      expect(read).toEqual(set);
      const json = validationSetToJson(read);
      expect(json.inputs).toEqual([[0, 0.25], [0.5, 0.75], [1, 0.125]]);
      expect(validationSetFromJson(JSON.parse(JSON.stringify(json)))).toEqual(set);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("zoo - a truncated file is rejected with its sizes", () => {
    expect(() => decodeValidationSet(encodeValidationSet(set).subarray(0, 30))).toThrow(
      "validation set: header says 3 x 2 (35 bytes), file has 30",
    );
  });
});
