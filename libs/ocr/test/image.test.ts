import { describe, expect, it } from "vitest";
import sharp from "sharp";
import {
  decodeImage,
  invert3x3,
  perspectiveTransform,
  resizeBilinear,
  rotate180,
  rotate90CounterClockwise,
  warpPerspective,
  type RgbImage,
} from "../src/index.js";

/** A w×h image whose pixel (x, y) is [x, y, x + y] (small sizes only). */
function ramp(w: number, h: number): RgbImage {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) data.set([x, y, x + y], (y * w + x) * 3);
  return { width: w, height: h, data };
}

const px = (img: RgbImage, x: number, y: number): number[] => Array.from(img.data.subarray((y * img.width + x) * 3, (y * img.width + x) * 3 + 3));

async function encode(img: RgbImage, format: "png" | "jpeg"): Promise<Uint8Array> {
  const s = sharp(Buffer.from(img.data), { raw: { width: img.width, height: img.height, channels: 3 } });
  return new Uint8Array(format === "png" ? await s.png().toBuffer() : await s.jpeg({ quality: 100 }).toBuffer());
}

describe("ocr - decoding", () => {
  it("ocr - a PNG decodes to its exact RGB pixels, a JPEG to nearly them", async () => {
    const img = ramp(20, 10);
    const png = await decodeImage(await encode(img, "png"), "image/png");
    expect(png).toEqual(img);
    const jpeg = await decodeImage(await encode(img, "jpeg"), "image/jpeg; charset=binary");
    expect([jpeg.width, jpeg.height]).toEqual([20, 10]);
    let maxDiff = 0;
    for (let i = 0; i < img.data.length; i++) maxDiff = Math.max(maxDiff, Math.abs((jpeg.data[i] as number) - (img.data[i] as number)));
    expect(maxDiff).toBeLessThan(12);
  });

  it("ocr - grey PNGs become three equal channels; transparency is flattened onto white", async () => {
    const grey = await sharp(Buffer.from([0, 100, 200, 255]), { raw: { width: 2, height: 2, channels: 1 } }).png().toBuffer();
    expect(Array.from((await decodeImage(new Uint8Array(grey))).data)).toEqual([0, 0, 0, 100, 100, 100, 200, 200, 200, 255, 255, 255]);
    // Black, once opaque and once fully transparent.
    const rgba = await sharp(Buffer.from([0, 0, 0, 255, 0, 0, 0, 0]), { raw: { width: 2, height: 1, channels: 4 } }).png().toBuffer();
    expect(Array.from((await decodeImage(new Uint8Array(rgba))).data)).toEqual([0, 0, 0, 255, 255, 255]);
  });

  it("ocr - anything but a whole PNG or JPEG is refused with invalid_data and a reason", async () => {
    const png = await encode(ramp(16, 16), "png");
    const jpeg = await encode(ramp(16, 16), "jpeg");
    await expect(decodeImage(new Uint8Array())).rejects.toMatchObject({ code: "invalid_data", message: "the image is empty" });
    await expect(decodeImage(new TextEncoder().encode("GIF89a not really"))).rejects.toMatchObject({ code: "invalid_data", message: "the data is not a PNG or JPEG image (unrecognised signature)" });
    await expect(decodeImage(png, "image/gif")).rejects.toMatchObject({ code: "invalid_data", message: "content type 'image/gif' is not supported: send image/png or image/jpeg" });
    await expect(decodeImage(jpeg, "image/png")).rejects.toMatchObject({ code: "invalid_data", message: "the content type says PNG but the data is a JPEG image" });
    await expect(decodeImage(new TextEncoder().encode("hello"), "image/jpeg")).rejects.toMatchObject({ code: "invalid_data", message: "the content type says JPEG but the data is not a JPEG image (its signature is missing)" });
    await expect(decodeImage(png.subarray(0, png.length - 20))).rejects.toMatchObject({ code: "invalid_data", message: expect.stringMatching(/^the PNG image cannot be decoded: /) as unknown });
    await expect(decodeImage(jpeg.subarray(0, jpeg.length / 2))).rejects.toMatchObject({ code: "invalid_data", message: expect.stringMatching(/^the JPEG image cannot be decoded: /) as unknown });
  });

  it("ocr - an image over 40 million pixels is refused with payload_too_large", async () => {
    const huge = await sharp({ create: { width: 8000, height: 5001, channels: 3, background: "#ffffff" } }).png({ compressionLevel: 1 }).toBuffer();
    await expect(decodeImage(new Uint8Array(huge))).rejects.toMatchObject({ code: "payload_too_large", message: "the image has more than 40000000 pixels" });
  });
});

describe("ocr - image geometry", () => {
  it("ocr - bilinear resize samples at (x + 0.5) · scale − 0.5 and clamps at the edges, as cv2.resize does", () => {
    // One row 0, 100 upscaled to 4: source positions −0.25 → 0, 0.25, 0.75, 1.25 → 1.
    const row: RgbImage = { width: 2, height: 1, data: Uint8Array.from([0, 0, 0, 100, 100, 100]) };
    expect(Array.from(resizeBilinear(row, 4, 1).data.filter((_, i) => i % 3 === 0))).toEqual([0, 25, 75, 100]);
    // Halving a 4-wide ramp reads between pixels 0,1 and 2,3: 0.5 and 2.5.
    const r = resizeBilinear(ramp(4, 4), 2, 2);
    expect(px(r, 0, 0)).toEqual([1, 1, 1]); // 0.5 rounds half up
    expect(px(r, 1, 1)).toEqual([3, 3, 5]);
  });

  it("ocr - 180° and 90° counter-clockwise rotations move pixels where numpy/OpenCV put them", () => {
    const img = ramp(3, 2);
    const r180 = rotate180(img);
    expect(px(r180, 0, 0)).toEqual(px(img, 2, 1));
    expect(rotate180(r180)).toEqual(img);
    const r90 = rotate90CounterClockwise(img); // np.rot90: the top-right corner goes to the top left
    expect([r90.width, r90.height]).toEqual([2, 3]);
    expect(px(r90, 0, 0)).toEqual(px(img, 2, 0));
    expect(px(r90, 1, 2)).toEqual(px(img, 0, 1));
  });

  it("ocr - the perspective transform maps the four corners, and warping with a translation crops exactly", () => {
    const src: Array<[number, number]> = [[10, 20], [50, 25], [48, 60], [8, 55]];
    const dst: Array<[number, number]> = [[0, 0], [40, 0], [40, 30], [0, 30]];
    const m = perspectiveTransform(src, dst);
    for (let k = 0; k < 4; k++) {
      const [x, y] = src[k] as [number, number];
      const w = (m[6] as number) * x + (m[7] as number) * y + (m[8] as number);
      expect(((m[0] as number) * x + (m[1] as number) * y + (m[2] as number)) / w).toBeCloseTo((dst[k] as [number, number])[0], 9);
      expect(((m[3] as number) * x + (m[4] as number) * y + (m[5] as number)) / w).toBeCloseTo((dst[k] as [number, number])[1], 9);
    }
    const inv = invert3x3(m);
    const id = [0, 1, 2].flatMap((r) => [0, 1, 2].map((c) => [0, 1, 2].reduce((s, k) => s + (m[r * 3 + k] as number) * (inv[k * 3 + c] as number), 0)));
    id.forEach((v, i) => expect(v).toBeCloseTo(i % 4 === 0 ? 1 : 0, 9));
    // A pure translation samples whole pixels: the crop is the region itself.
    const img = ramp(12, 10);
    const crop = warpPerspective(img, perspectiveTransform([[3, 2], [8, 2], [8, 6], [3, 6]], [[0, 0], [5, 0], [5, 4], [0, 4]]), 5, 4);
    for (let y = 0; y < 4; y++) for (let x = 0; x < 5; x++) expect(px(crop, x, y)).toEqual(px(img, x + 3, y + 2));
    expect(() => perspectiveTransform([[0, 0], [1, 1], [2, 2], [3, 3]], dst)).toThrow(/collinear/);
  });
});
