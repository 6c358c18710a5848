// Debian's Chromium (/usr/bin/chromium) driven by playwright-core, which
// downloads no browser: launched headless in a fresh profile with nothing
// that reaches beyond loopback, at a fixed size, zone, clock and font so
// that screenshots compare across runs and machines.

import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
  "--font-render-hinting=none", "--force-color-profile=srgb",
];

/** The instant the page's clock shows: Date.now() is frozen there, timers still run. */
export const PAGE_NOW = Date.UTC(2026, 0, 12, 12, 0);

/** Launches the browser and resolves {page, context, close}. */
export async function launch() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (scripts/install-test-tools.sh does)`);
  }
  const profile = mkdtempSync(join(tmpdir(), "tsgate-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 860 },
    deviceScaleFactor: 1,
    timezoneId: "UTC",
    locale: "en-US",
    colorScheme: "light",
    reducedMotion: "reduce",
    acceptDownloads: true,
  });
  // Pin the page's font to DejaVu Sans (Debian's fonts-dejavu-core), so
  // that screenshots do not depend on which fonts a machine has and which
  // one its fontconfig calls system-ui.
  await context.route("**/assets/app.css", async (route) => {
    const res = await route.fetch();
    const css = (await res.text()) + `\n:root, input, select, button, code { font-family: "DejaVu Sans" !important; }\n`;
    await route.fulfill({ response: res, body: css });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  await page.clock.setFixedTime(PAGE_NOW);
  const errors = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  // Console errors too (a Content-Security-Policy violation is one), but
  // not the browser's note on each answer with an error status, which the
  // tests cause on purpose.
  page.on("console", (m) => m.type() === "error" && !/^Failed to load resource/.test(m.text()) && errors.push(m.text()));
  return {
    page, context, errors,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** How many reads of points the page has finished. */
export async function loads(page) {
  return Number((await page.evaluate(() => document.documentElement.dataset.loads)) || 0);
}

/** Runs action and waits until the page has finished a read after it. */
export async function afterLoad(page, action) {
  const before = await loads(page);
  await action();
  await page.waitForFunction((n) => Number(document.documentElement.dataset.loads || 0) > n, before, { timeout: 15_000 });
}
