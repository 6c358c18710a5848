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
 * marks them in red; images of different sizes differ entirely.
 */
export function diff(a, b) {
  if (a.width !== b.width || a.height !== b.height) return { ratio: 1, image: null };
  const out = new PNG({ width: a.width, height: a.height });
  let n = 0;
  for (let i = 0; i < a.data.length; i += 4) {
    let d = 0;
    for (let c = 0; c < 3; c++) d = Math.max(d, Math.abs(a.data[i + c] - b.data[i + c]));
    const differs = d > CHANNEL_TOLERANCE;
    if (differs) n++;
    const grey = (a.data[i] + a.data[i + 1] + a.data[i + 2]) / 3;
    out.data[i] = differs ? 255 : grey * 0.3 + 178;
    out.data[i + 1] = differs ? 0 : grey * 0.3 + 178;
    out.data[i + 2] = differs ? 0 : grey * 0.3 + 178;
    out.data[i + 3] = 255;
  }
  return { ratio: n / (a.width * a.height), image: out };
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
