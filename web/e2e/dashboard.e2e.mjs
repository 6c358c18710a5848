// The dashboard in a real browser against a real gateway (make browser-test):
//
//	cd web/e2e && npm ci && node --test dashboard.e2e.mjs
//
// One gateway on the embedded store holds three series written at fixed
// times and five labelled ones; one Chromium page walks through loading,
// switching series, zooming, overlaying, exporting, the error messages,
// then selectors typed with completion and their groups. Screenshots of
// the chart are compared with the baselines in screenshots/
// (UPDATE_SCREENSHOTS=1 refreshes them).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";

import { afterLoad, launch } from "./browser.mjs";
import { formatExact } from "../static/assets/lib.js";
import { DAY, HOUR, LABELLED, T0, fill, fillLabelled, getJSON, start } from "./gateway.mjs";
import { matchBaseline } from "./screenshots.mjs";

const FROM = new Date(T0).toISOString().replace(".000Z", "Z"); // 2026-01-10T00:00:00Z
const TO = new Date(T0 + DAY).toISOString().replace(".000Z", "Z");
const HASH = `#series=e2e.temperature&from=${FROM}&to=${TO}`;

let gw;
let browser;
let page;

/** The dashboard's URL state as an object. */
async function hashState() {
  return Object.fromEntries(new URLSearchParams((await page.evaluate(() => location.hash)).slice(1)));
}

/** A screenshot of an element (the chart card: chart, legend, help), pointer moved away first. */
async function shoot(name, selector = ".chart-card") {
  await page.mouse.move(1, 1);
  const png = await page.locator(selector).screenshot({ animations: "disabled", caret: "hide" });
  matchBaseline(name, png);
}

/** The bounding box of the plot area: the chart's canvas less its axes' margins (chart.js MARGIN). */
async function plotBox() {
  const box = await page.locator("#chart canvas.overlay").boundingBox();
  return { x0: box.x + 64, x1: box.x + box.width - 18, y: box.y + box.height / 3 };
}

const timeAtX = (plot, x, from, to) => from + ((x - plot.x0) / (plot.x1 - plot.x0)) * (to - from);

/** Waits until the selector field offers exactly want, and checks that it does. */
async function expectOptions(want) {
  const same = (w) => {
    const list = document.getElementById("match-options");
    return JSON.stringify(list.hidden ? [] : [...list.children].map((li) => li.textContent)) === JSON.stringify(w);
  };
  await page.waitForFunction(same, want, { timeout: 5000 }).catch(() => {});
  const list = page.locator("#match-options");
  assert.deepEqual((await list.isHidden()) ? [] : await list.locator("li").allTextContents(), want);
}

const activeOption = () => page.locator('#match-options li[aria-selected="true"]').textContent();

/** The legend's entries of lines (series or groups). */
const legendKeys = () => page.locator("#legend .series-key").allTextContents();

/** The answer of the gateway to the request the page made for the chart (the link under the facts). */
async function pageAnswer() {
  const req = new URL(await page.getAttribute("#request", "href"), gw.url);
  return { req, answer: await getJSON(gw.url, req.pathname + req.search) };
}

/**
 * What the tooltip shows with the pointer at x over the plot: the window's
 * time (UTC in this page) and each line's values as written: {t, lines:
 * {name: {column: text}}} (name "" when the chart has one line).
 */
async function tooltipAt(x) {
  const plot = await plotBox();
  await page.mouse.move(x, plot.y);
  await page.waitForSelector(".tooltip:not([hidden])");
  const tip = await page.evaluate(() => {
    const el = document.querySelector(".tooltip");
    const lines = {};
    let name = "";
    for (const row of el.children) {
      if (row.className === "tt-series") name = row.textContent;
      if (row.className === "tt-value") (lines[name] ??= {})[row.querySelector(".tt-key").textContent] = row.querySelector(".tt-val").textContent;
    }
    return { time: el.querySelector(".tt-title").textContent, lines };
  });
  return { t: Date.parse(tip.time.replace(" ", "T") + "Z"), lines: tip.lines };
}

/**
 * Checks that the lines drawn hold the API's values: under the pointer at
 * a fifth, a half and four fifths of the plot, every line's values are the
 * answer's for that window, result k being the line named names[k].
 */
async function drawnAsAnswered(answer, names) {
  const plot = await plotBox();
  for (const frac of [0.2, 0.5, 0.8]) {
    const { t, lines } = await tooltipAt(plot.x0 + frac * (plot.x1 - plot.x0));
    assert.deepEqual(Object.keys(lines).sort(), [...names].sort(), `lines at ${new Date(t).toISOString()}`);
    answer.results.forEach((r, k) => {
      const row = r.points.find((p) => p[0] === t);
      assert.ok(row, `${names[k]} has a window at ${new Date(t).toISOString()}`);
      const want = Object.fromEntries(r.columns.slice(1).map((c, j) => [c, formatExact(row[j + 1])]));
      assert.deepEqual(lines[names[k]], want, `${names[k]} at ${new Date(t).toISOString()}`);
    });
  }
  await page.mouse.move(1, 1);
}

/** Types text into the selector field and applies it with the Show button. */
async function applySelector(text) {
  await afterLoad(page, async () => {
    await page.fill("#match", text);
    await page.click('#selector-form button[type="submit"]');
  });
}

/** A screenshot of the selector bar and the suggestions open under it. */
async function shootSuggestions(name) {
  await page.mouse.move(1, 1);
  const form = await page.locator("#selector-form").boundingBox();
  const list = await page.locator("#match-options").boundingBox();
  const clip = { x: form.x, y: form.y, width: form.width, height: list.y + list.height + 6 - form.y };
  matchBaseline(name, await page.screenshot({ clip, animations: "disabled", caret: "hide" }));
}

describe("dashboard in Chromium", { timeout: 180_000 }, () => {
  before(async () => {
    // Four series at most per selector: {dc=~".+"} matches five.
    gw = await start({ extraArgs: ["--max-series-per-query", "4"] });
    await fill(gw.url);
    await fillLabelled(gw.url);
    browser = await launch();
    page = browser.page;
  });
  after(async () => {
    const errors = browser?.errors ?? [];
    await browser?.close();
    await gw?.stop();
    assert.deepEqual(errors, [], "no script error in the page");
  });

  it("loads a series with whole windows from the left edge", async () => {
    await afterLoad(page, () => page.goto(gw.url + "/" + HASH));
    await page.waitForSelector("#series-list li");
    assert.deepEqual(await page.locator("#series-list .id").allTextContents(), [...Object.keys(LABELLED), "e2e.load", "e2e.pressure", "e2e.temperature"].sort());
    assert.equal(await page.textContent("#series-title"), "e2e.temperature");
    assert.equal(await page.locator("#problem").isHidden(), true);
    assert.equal(await page.evaluate(() => getComputedStyle(document.documentElement).fontFamily), '"DejaVu Sans"', "the screenshots' font");
    assert.deepEqual(browser.errors, [], "no script error");
    // The page chose the window: a round step, from aligned down to it.
    const req = new URL(await page.getAttribute("#request", "href"), gw.url);
    const from = Number(req.searchParams.get("from"));
    assert.equal(req.searchParams.get("resolution"), "auto");
    const answer = await getJSON(gw.url, req.pathname + req.search);
    assert.ok([60_000, 120_000, 300_000].includes(answer.resolution_ms), `window ${answer.resolution_ms}`);
    assert.equal(from % answer.resolution_ms, 0, "from is aligned to the window");
    assert.equal(answer.points[0][0], T0, "the first window starts at the range's start");
    // The tier names shown are the configured pyramid's, as the gateway
    // lists them.
    assert.equal(answer.tier, "fine");
    assert.match(await page.textContent("#facts"), /Tier\s*fine/);
    assert.match(await page.textContent("#legend"), /fine Jan 10 00:00 – Jan 11 00:00/);
    assert.match(await page.textContent("#series-meta"), /tiers keep raw 3650d, fine 3650d, coarse 3650d, daily forever/);
    await shoot("load");
  });

  it("switches series from the list", async () => {
    await afterLoad(page, () => page.click('#series-list button[data-id="e2e.pressure"]'));
    assert.equal((await hashState()).series, "e2e.pressure");
    assert.equal(await page.textContent("#series-title"), "e2e.pressure");
    assert.match(await page.getAttribute("#request", "href"), /v1\/series\/e2e\.pressure\/points/);
    await afterLoad(page, () => page.click('#series-list button[data-id="e2e.temperature"]'));
    assert.equal((await hashState()).series, "e2e.temperature");
  });

  it("zooms into a dragged span and back out on double-click", async () => {
    const plot = await plotBox();
    const a = plot.x0 + (plot.x1 - plot.x0) * 0.25;
    const b = plot.x0 + (plot.x1 - plot.x0) * 0.5;
    await afterLoad(page, async () => {
      await page.mouse.move(a, plot.y);
      await page.mouse.down();
      await page.mouse.move((a + b) / 2, plot.y, { steps: 4 });
      await page.mouse.move(b, plot.y, { steps: 4 });
      await page.mouse.up();
    });
    const st = await hashState();
    const from = Date.parse(st.from);
    const to = Date.parse(st.to);
    // A quarter to a half of the day: 06:00 to 12:00, to a pixel's time.
    const px = DAY / (plot.x1 - plot.x0);
    assert.ok(Math.abs(from - (T0 + 6 * HOUR)) <= px, `from ${st.from}`);
    assert.ok(Math.abs(to - (T0 + 12 * HOUR)) <= px, `to ${st.to}`);
    const req = new URL(await page.getAttribute("#request", "href"), gw.url);
    const answer = await getJSON(gw.url, req.pathname + req.search);
    assert.ok(answer.resolution_ms < 120_000, "a finer window for the shorter range");
    assert.equal(await page.locator("#zoom-reset").isVisible(), true);
    await shoot("zoomed");
    await afterLoad(page, () => page.mouse.dblclick((plot.x0 + plot.x1) / 2, plot.y));
    const back = await hashState();
    assert.deepEqual([back.from, back.to], [FROM, TO]);
    assert.equal(await page.locator("#zoom-reset").isVisible(), false);
  });

  it("zooms with the wheel around the pointer and pans with shift+wheel", async () => {
    const plot = await plotBox();
    const x = plot.x0 + (plot.x1 - plot.x0) * 0.75;
    const at = timeAtX(plot, x, T0, T0 + DAY);
    await page.mouse.move(x, plot.y);
    await afterLoad(page, () => page.mouse.wheel(0, -400));
    let st = await hashState();
    let from = Date.parse(st.from);
    let to = Date.parse(st.to);
    assert.ok(to - from < DAY * 0.6, `zoomed in to ${st.from} – ${st.to}`);
    const frac = (at - from) / (to - from);
    assert.ok(Math.abs(frac - 0.75) < 0.02, `the instant under the pointer stays under it (${frac})`);
    const span = to - from;
    await page.keyboard.down("Shift");
    await afterLoad(page, () => page.mouse.wheel(0, 200));
    await page.keyboard.up("Shift");
    st = await hashState();
    const from2 = Date.parse(st.from);
    const to2 = Date.parse(st.to);
    assert.equal(to2 - from2, span, "panning keeps the span");
    assert.ok(from2 > from, "shift+wheel down pans to later times");
    await afterLoad(page, () => page.mouse.dblclick(x, plot.y));
    st = await hashState();
    assert.deepEqual([st.from, st.to], [FROM, TO]);
  });

  it("overlays a series and toggles it in the legend", async () => {
    await afterLoad(page, () => page.click('#series-list .overlay-toggle[data-id="e2e.load"]'));
    assert.equal((await hashState()).overlay, "e2e.load");
    const keys = page.locator("#legend .series-key");
    assert.deepEqual(await keys.allTextContents(), ["e2e.temperature", "e2e.load"]);
    await shoot("overlay");
    await page.click('#legend .series-key[data-id="e2e.temperature"]');
    assert.equal((await hashState()).hide, "e2e.temperature");
    assert.equal(await page.getAttribute('#legend .series-key[data-id="e2e.temperature"]', "aria-pressed"), "false");
    await shoot("overlay-hidden");
    await page.click('#legend .series-key[data-id="e2e.temperature"]');
    assert.equal((await hashState()).hide, undefined);
  });

  it("exports the visible series as CSV equal to the API's answers", async () => {
    await page.click('#legend .series-key[data-id="e2e.temperature"]'); // hide it: only e2e.load is exported
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
    const csv = readFileSync(await download.path(), "utf8");
    assert.match(download.suggestedFilename(), /^tsgate-e2e\.load-.*\.csv$/);
    const req = new URL(await page.getAttribute("#request", "href"), gw.url);
    const answer = await getJSON(gw.url, req.pathname.replace("e2e.temperature", "e2e.load") + req.search);
    const lines = csv.trimEnd().split("\n");
    assert.equal(lines[0], ["series", "t", "time", ...answer.columns.slice(1)].join(","));
    assert.equal(lines.length - 1, answer.points.length);
    answer.points.forEach((row, i) => {
      const f = lines[i + 1].split(",");
      assert.equal(f[0], "e2e.load");
      assert.equal(Number(f[1]), row[0]);
      assert.equal(f[2], new Date(row[0]).toISOString());
      assert.deepEqual(f.slice(3).map(Number), row.slice(1), `line ${i + 2}`);
    });
    // Both series once both are shown.
    await page.click('#legend .series-key[data-id="e2e.temperature"]');
    const [both] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
    const ids = new Set(readFileSync(await both.path(), "utf8").trimEnd().split("\n").slice(1).map((l) => l.split(",")[0]));
    assert.deepEqual([...ids], ["e2e.temperature", "e2e.load"]);
  });

  it("draws tier segments and the part a partial answer did not cover", async () => {
    // The gateway's own answer, cut as a budget-limited page would be: the
    // last quarter not covered, the covered part served by two tiers.
    const cut = T0 + 18 * HOUR;
    await page.route("**/v1/series/e2e.temperature/points?*", async (route) => {
      const res = await route.fetch();
      const a = await res.json();
      a.points = a.points.filter((p) => p[0] < cut);
      a.partial = true;
      a.partial_reason = "slo";
      a.covered = [a.from, cut];
      a.segments = [{ from: a.from, to: T0 + 12 * HOUR, tier: "fine" }, { from: T0 + 12 * HOUR, to: cut, tier: "raw" }];
      await route.fulfill({ response: res, json: a });
    });
    try {
      await afterLoad(page, () => page.click("#reload"));
      const messages = await page.textContent("#messages");
      assert.match(messages, /Partial answer: the latency budget ran out before the whole range was read/);
      assert.doesNotMatch(messages, /store/);
      const legend = await page.textContent("#legend");
      assert.match(legend, /not covered/);
      assert.match(legend, /fine Jan 10 00:00 – Jan 10 12:00.*raw Jan 10 12:00 – Jan 10 18:00/s);
      await shoot("partial");
    } finally {
      await page.unroute("**/v1/series/e2e.temperature/points?*");
    }
    await afterLoad(page, () => page.click("#reload"));
    assert.equal(await page.locator("#messages").textContent(), "");
  });

  it("says in words why a resolution is refused", async () => {
    await page.fill("#res", "3x");
    await page.press("#res", "Enter");
    const msg = page.locator("#res-error");
    assert.equal(await msg.isVisible(), true);
    assert.match(await msg.textContent(), /“3x” is not a resolution: use auto, raw, or a window/);
    assert.equal(await page.getAttribute("#res", "aria-invalid"), "true");
    await page.fill("#res", "500ms");
    await page.press("#res", "Enter");
    assert.match(await msg.textContent(), /shorter than a second/);
    assert.equal((await hashState()).res, undefined, "the refused value is not applied");
    await afterLoad(page, async () => {
      await page.fill("#res", "1h");
      await page.press("#res", "Enter");
    });
    assert.equal(await msg.isHidden(), true);
    assert.equal((await hashState()).res, "1h");
  });

  it("reads the range again at the chosen refresh interval", async () => {
    // The page's clock stands at Jan 12 12:00: the last 24 hours end "now".
    await afterLoad(page, () => page.goto(`${gw.url}/#series=e2e.temperature&range=24h`));
    assert.equal(await page.isEnabled("#refresh"), true);
    assert.deepEqual(await page.locator("#refresh option").allTextContents(), ["off", "5s", "10s", "30s", "1m", "5m"]);
    await page.selectOption("#refresh", "5s");
    assert.equal((await hashState()).refresh, "5s");
    const t0 = Date.now();
    await afterLoad(page, async () => {}); // nothing but the timer reads
    const waited = Date.now() - t0;
    assert.ok(waited > 4000 && waited < 9000, `read again after ${waited} ms`);
    await page.selectOption("#refresh", "off");
    assert.equal((await hashState()).refresh, undefined);
    // A range that does not end now has nothing to refresh.
    await afterLoad(page, () => page.goto(`${gw.url}/${HASH}`));
    assert.equal(await page.isDisabled("#refresh"), true);
  });

  it("names an unknown series", async () => {
    await afterLoad(page, () => page.goto(`${gw.url}/#series=e2e.nothing&from=${FROM}&to=${TO}`));
    const problem = page.locator("#problem");
    assert.equal(await problem.isVisible(), true);
    assert.match(await problem.textContent(), /Unknown series.*404.*No series has this id/s);
    await shoot("unknown-series", "#problem");
  });

  it("completes a selector's label names and values from the keyboard and draws each series it matches", async () => {
    await afterLoad(page, () => page.goto(gw.url + "/" + HASH));
    await page.click("#match");
    await page.keyboard.type("cpu{");
    // After "{": the label names of cpu's series (the metric's own name
    // left out), and the pseudo-label series.
    await expectOptions(["dc", "host", "series"]);
    assert.equal(await page.getAttribute("#match", "aria-expanded"), "true");
    await page.keyboard.type("d");
    await expectOptions(["dc"]);
    await page.keyboard.press("Enter");
    assert.equal(await page.inputValue("#match"), "cpu{dc");
    await page.keyboard.type("=");
    await expectOptions(["eu", "us"]);
    assert.equal(await activeOption(), "eu");
    await page.keyboard.press("ArrowDown");
    assert.equal(await activeOption(), "us");
    await page.keyboard.press("ArrowUp");
    await page.keyboard.press("Tab");
    assert.equal(await page.inputValue("#match"), 'cpu{dc="eu"}', "the value quoted, the braces closed");
    assert.equal(await page.evaluate(() => document.activeElement.id), "match", "Tab took the suggestion and kept the focus");
    // The values of host among the series of cpu{dc="eu"} only.
    await page.keyboard.type(", host=");
    await expectOptions(["a", "b"]);
    await shootSuggestions("completion");
    await page.keyboard.press("Escape");
    await expectOptions([]);
    assert.equal(await page.getAttribute("#match", "aria-expanded"), "false");
    for (let i = 0; i < ", host=".length; i++) await page.keyboard.press("Backspace");
    await expectOptions([]);
    assert.equal(await page.inputValue("#match"), 'cpu{dc="eu"}');
    await afterLoad(page, () => page.keyboard.press("Enter"));

    const st = await hashState();
    assert.equal(st.match, 'cpu{dc="eu"}');
    assert.equal(st.series, undefined, "the selector's series instead of the picked one");
    assert.equal(await page.textContent("#series-title"), 'cpu{dc="eu"}');
    assert.match(await page.textContent("#series-meta"), /^2 series match$/);
    const names = ['cpu{dc="eu", host="a"}', 'cpu{dc="eu", host="b"}'];
    assert.deepEqual(await legendKeys(), names);
    const { req, answer } = await pageAnswer();
    assert.equal(req.pathname, "/v1/points");
    assert.equal(req.searchParams.get("match"), 'cpu{dc="eu"}');
    assert.deepEqual(answer.results.map((r) => r.series), ["e2e.cpu.eu.a", "e2e.cpu.eu.b"]);
    await drawnAsAnswered(answer, names);
    // A matched series hides by its id, like a picked one.
    await page.click('#legend .series-key[data-id="e2e.cpu.eu.a"]');
    assert.equal((await hashState()).hide, "e2e.cpu.eu.a");
    await page.click('#legend .series-key[data-id="e2e.cpu.eu.a"]');
  });

  it("groups the selector's series by a label, or all into one, in a link that reproduces the view", async () => {
    await applySelector("cpu");
    assert.equal((await legendKeys()).length, 4, "one line per series");
    const colours = await page.locator("#legend .series-key i").evaluateAll((is) => is.map((i) => i.className));
    assert.equal(new Set(colours).size, 4, `four colours: ${colours}`);

    // The menu lists the label names of the selector's series.
    await page.click("#group-by summary");
    await page.waitForSelector('#group-by-labels input[value="dc"]');
    assert.deepEqual(await page.locator("#group-by-labels code").allTextContents(), ["__name__", "dc", "host"]);
    await afterLoad(page, () => page.check('#group-by-labels input[value="dc"]'));
    await page.keyboard.press("Escape");
    assert.equal(await page.locator("#group-by").getAttribute("open"), null, "Escape closed the menu");
    assert.equal((await hashState()).group_by, "dc");
    assert.equal(await page.textContent("#group-by-text"), "dc");
    const names = ['{dc="eu"}', '{dc="us"}'];
    assert.deepEqual(await legendKeys(), names.map((n) => `${n} · 2 series`));
    const { req, answer } = await pageAnswer();
    assert.equal(req.searchParams.get("group_by"), "dc");
    assert.deepEqual(answer.results.map((r) => [r.group, r.series_count]), [[{ dc: "eu" }, 2], [{ dc: "us" }, 2]]);
    await drawnAsAnswered(answer, names);
    await shoot("groups");

    // The export holds the groups' windows as the API gave them.
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
    const csv = readFileSync(await download.path(), "utf8").trimEnd().split("\n");
    const quoted = (s) => `"${s.replaceAll('"', '""')}"`;
    assert.deepEqual(csv, [
      ["series", "t", "time", ...answer.results[0].columns.slice(1)].join(","),
      ...answer.results.flatMap((r, k) => r.points.map((p) => [quoted(names[k]), p[0], new Date(p[0]).toISOString(), ...p.slice(1)].join(","))),
    ]);

    // A group hides by its labels; the link keeps selector, grouping and
    // hidden groups.
    await page.locator("#legend .series-key", { hasText: '{dc="eu"}' }).click();
    assert.equal((await hashState()).hidegroup, '{dc="eu"}');
    const link = await page.evaluate(() => location.href);
    await page.goto("about:blank");
    await page.goto(link);
    await page.waitForFunction(() => Number(document.documentElement.dataset.loads || 0) > 0);
    assert.equal(await page.inputValue("#match"), "cpu");
    assert.equal(await page.textContent("#group-by-text"), "dc");
    assert.deepEqual(await legendKeys(), names.map((n) => `${n} · 2 series`));
    assert.equal(await page.locator("#legend .series-key", { hasText: '{dc="eu"}' }).getAttribute("aria-pressed"), "false");
    await page.locator("#legend .series-key", { hasText: '{dc="eu"}' }).click();

    // One group of all: one line, the average over every series' points.
    await page.click("#group-by summary");
    await afterLoad(page, () => page.check('#group-by input[name="grouping"][value="all"]'));
    await page.keyboard.press("Escape");
    assert.equal((await hashState()).group_by, "");
    assert.deepEqual(await legendKeys(), ["all series · 4 series · avg"]);
    const all = (await pageAnswer()).answer;
    assert.deepEqual(all.results.map((r) => [r.group, r.series_count]), [[{}, 4]]);
    await drawnAsAnswered(all, [""]);
  });

  it("shows the API's refusals of a selector or grouping next to the field", async () => {
    // Raw points cannot be grouped.
    await afterLoad(page, async () => {
      await page.fill("#res", "raw");
      await page.press("#res", "Enter");
    });
    const box = page.locator("#match-error");
    assert.equal(await box.isVisible(), true);
    assert.match(await box.textContent(), /Invalid parameter.*400.*group_by.*aggregated resolution/s);
    assert.equal(await page.getAttribute("#group-by summary", "aria-invalid"), "true");
    assert.equal(await page.getAttribute("#match", "aria-invalid"), "false");
    assert.equal(await page.locator("#problem").isHidden(), true, "not in the chart's problem box");
    await afterLoad(page, async () => {
      await page.fill("#res", "auto");
      await page.press("#res", "Enter");
    });
    assert.equal(await box.isHidden(), true);

    // More series than --max-series-per-query.
    await applySelector('{dc=~".+"}');
    assert.match(await box.textContent(), /400.*match/s);
    assert.match(await box.textContent(), /\b5\b/, "the count found");
    assert.equal(await page.getAttribute("#match", "aria-invalid"), "true");
    await shoot("too-many", "#selector-form");

    // Not a selector.
    await applySelector("cpu{dc=");
    assert.match(await box.textContent(), /match.*not a selector/s);

    // Picking a series in the list leaves the selector.
    await afterLoad(page, () => page.click('#series-list button[data-id="e2e.temperature"]'));
    assert.equal(await box.isHidden(), true);
    assert.equal(await page.inputValue("#match"), "");
    const st = await hashState();
    assert.deepEqual([st.series, st.match, st.group_by], ["e2e.temperature", undefined, undefined]);
  });

  it("draws a percentile line with a percentile band from the rollups' sketches", async () => {
    await afterLoad(page, () => page.selectOption("#agg", "p99"));
    await afterLoad(page, () => page.selectOption("#band", "p5-p95"));
    const state = await hashState();
    assert.deepEqual([state.agg, state.band_of], ["p99", "p5-p95"]);
    const req = new URL(await page.getAttribute("#request", "href"), gw.url);
    assert.equal(req.searchParams.get("agg"), "p5,p95,p99");
    const answer = await getJSON(gw.url, req.pathname + req.search);
    assert.deepEqual(answer.columns, ["t", "p5", "p95", "p99"]);
    assert.ok(answer.points.length > 0 && answer.points.every((p) => p[1] <= p[2]), "p5 is at most p95 in every window");
    assert.match(await page.textContent("#legend"), /p5–p95/);
    assert.doesNotMatch(await page.textContent("#legend"), /min–max/);
    // Sum has no band: the control says so.
    await afterLoad(page, () => page.selectOption("#agg", "sum"));
    assert.equal(await page.isDisabled("#band"), true);
    assert.equal(await page.inputValue("#band"), "off");
    await afterLoad(page, () => page.selectOption("#agg", "avg"));
    assert.equal(await page.inputValue("#band"), "p5-p95");
    await afterLoad(page, () => page.selectOption("#band", "off"));
    assert.equal((await hashState()).band, "0");
    assert.match(await page.getAttribute("#request", "href"), /agg=avg(&|$)/);
    await afterLoad(page, () => page.selectOption("#band", "minmax"));
    const back = await hashState();
    assert.deepEqual([back.band, back.band_of], [undefined, undefined]);
  });
});
