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
  it("counts the pixels that differ by more than the channel tolerance", () => {
    const b = image(40, 30, (x, y) => (x < 4 && y < 5 ? [0, 0, 0] : x === 10 ? [240, 240, 240] : [255, 255, 255]));
    const { ratio, image: marked } = diff(image(40, 30), b);
    assert.equal(ratio, 20 / 1200);
    assert.deepEqual([...marked.data.subarray(0, 4)], [255, 0, 0, 255]);
  });
});
