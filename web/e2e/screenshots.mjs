// Screenshots compared with committed baselines (web/e2e/screenshots/*.png):
// the share of pixels that differ by more than a small amount in any
// channel must stay within a tolerance, so that anti-aliasing and font
// hinting may vary but a moved line or a missing label may not.
// UPDATE_SCREENSHOTS=1 writes the baselines instead of comparing.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { PNG } from "pngjs";

const DIR = new URL("./screenshots/", import.meta.url).pathname;
const OUT = new URL("./out/", import.meta.url).pathname;

/** Channel difference (0–255) below which two pixels count as equal. */
export const CHANNEL_TOLERANCE = 32;
/** Share of differing pixels a screenshot may have. */
export const RATIO_TOLERANCE = 0.01;

export const updating = () => process.env.UPDATE_SCREENSHOTS === "1";

/**
 * The share of pixels of two PNG images that differ, and an image that
 * marks them in red. A pixel differs when neither image has its colour
 * within one pixel of where the other has it: layout that ends on a
 * fraction of a pixel is rasterized a pixel up or down depending on the
 * fraction (an element's box, a canvas sized to whole pixels inside it),
 * which moves the text and lines under it by a pixel but never by two,
 * and never removes one. An element whose box ends on a fraction of a
 * pixel is also captured one pixel taller or wider: images one pixel
 * apart in a dimension are compared over what they share, the extra row
 * or column counting as differing; images further apart differ entirely.
 */
export function diff(a, b) {
  if (Math.abs(a.width - b.width) > 1 || Math.abs(a.height - b.height) > 1) return { ratio: 1, image: null };
  const width = Math.max(a.width, b.width);
  const height = Math.max(a.height, b.height);
  const out = new PNG({ width, height });
  // Whether the pixel (x, y) of p has a colour within tolerance of some
  // pixel of q at most one pixel away.
  const near = (p, q, x, y) => {
    const i = (y * p.width + x) * 4;
    for (let dy = -1; dy <= 1; dy++) {
      const qy = y + dy;
      if (qy < 0 || qy >= q.height) continue;
      for (let dx = -1; dx <= 1; dx++) {
        const qx = x + dx;
        if (qx < 0 || qx >= q.width) continue;
        const j = (qy * q.width + qx) * 4;
        let d = 0;
        for (let c = 0; c < 3; c++) d = Math.max(d, Math.abs(p.data[i + c] - q.data[j + c]));
        if (d <= CHANNEL_TOLERANCE) return true;
      }
    }
    return false;
  };
  let n = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 4;
      let differs = true;
      let grey = 0;
      if (x < a.width && y < a.height && x < b.width && y < b.height) {
        differs = !near(a, b, x, y) || !near(b, a, x, y);
        const i = (y * a.width + x) * 4;
        grey = (a.data[i] + a.data[i + 1] + a.data[i + 2]) / 3;
      }
      if (differs) n++;
      out.data[o] = differs ? 255 : grey * 0.3 + 178;
      out.data[o + 1] = differs ? 0 : grey * 0.3 + 178;
      out.data[o + 2] = differs ? 0 : grey * 0.3 + 178;
      out.data[o + 3] = 255;
    }
  }
  return { ratio: n / (width * height), image: out };
}

/**
 * Compares the PNG buffer png with the baseline name.png, or writes the
 * baseline when updating. On a mismatch, writes the actual image and the
 * difference to web/e2e/out/ and throws.
 */
export function matchBaseline(name, png) {
  const file = `${DIR}${name}.png`;
  if (updating()) {
    mkdirSync(DIR, { recursive: true });
    writeFileSync(file, png);
    return { ratio: 0, updated: true };
  }
  if (!existsSync(file)) throw new Error(`no baseline ${file}: run with UPDATE_SCREENSHOTS=1 to create it`);
  const { ratio, image } = diff(PNG.sync.read(readFileSync(file)), PNG.sync.read(png));
  if (ratio > RATIO_TOLERANCE) {
    mkdirSync(OUT, { recursive: true });
    writeFileSync(`${OUT}${name}.actual.png`, png);
    if (image) writeFileSync(`${OUT}${name}.diff.png`, PNG.sync.write(image));
    throw new Error(`screenshot ${name}: ${(ratio * 100).toFixed(2)}% of the pixels differ from the baseline (tolerance ${RATIO_TOLERANCE * 100}%); see ${OUT}${name}.actual.png and .diff.png, or run with UPDATE_SCREENSHOTS=1 if the change is intended`);
  }
  return { ratio, updated: false };
}
