// The screenshot comparison itself (run by make browser-test, where pngjs
// is installed; not named *.test.mjs, which the unit tests would pick up
// without it): equal images, one pixel of size apart, further apart, and
// changed pixels.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PNG } from "pngjs";

import { diff } from "./screenshots.mjs";

function image(width, height, paint = () => [255, 255, 255]) {
  const png = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [r, g, b] = paint(x, y);
      png.data.set([r, g, b, 255], (y * width + x) * 4);
    }
  }
  return png;
}

describe("screenshot diff", () => {
  it("finds nothing between equal images", () => {
    assert.equal(diff(image(40, 30), image(40, 30)).ratio, 0);
  });
  it("compares images a pixel apart over what they share, the extra row or column differing", () => {
    assert.equal(diff(image(40, 30), image(40, 31)).ratio, 40 / (40 * 31));
    assert.equal(diff(image(41, 30), image(40, 30)).ratio, 30 / (41 * 30));
    assert.equal(diff(image(40, 30), image(40, 32)).ratio, 1);
    assert.equal(diff(image(40, 30), image(38, 30)).ratio, 1);
  });
  it("takes text and lines moved by one pixel as equal, not by two, and not a line missing", () => {
    const text = (x0, y0) => (x, y) => (x >= x0 && x < x0 + 6 && y >= y0 && y < y0 + 3 ? [20, 20, 20] : [255, 255, 255]);
    assert.equal(diff(image(40, 30, text(10, 10)), image(40, 30, text(11, 9))).ratio, 0);
    assert.ok(diff(image(40, 30, text(10, 10)), image(40, 30, text(10, 12))).ratio > 0, "two pixels down");
    const line = (x, y) => (y === 15 ? [37, 99, 235] : [255, 255, 255]);
    assert.equal(diff(image(40, 30, line), image(40, 30)).ratio, 40 / 1200, "a line one pixel thin, missing");
    assert.equal(diff(image(40, 30), image(40, 30, line)).ratio, 40 / 1200, "a line one pixel thin, added");
  });
  it("counts the pixels that differ by more than the channel tolerance", () => {
    const b = image(40, 30, (x, y) => (x < 4 && y < 5 ? [0, 0, 0] : x === 10 ? [240, 240, 240] : [255, 255, 255]));
    const { ratio, image: marked } = diff(image(40, 30), b);
    assert.equal(ratio, 20 / 1200);
    assert.deepEqual([...marked.data.subarray(0, 4)], [255, 0, 0, 255]);
  });
});
