// Unit tests of the dashboard's pure helpers, for Node's built-in runner:
//
//	node --test web/
//
// Times are checked in fixed zones passed as offset functions, so the
// results do not depend on the machine's time zone.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { describe, it } from "node:test";

import {
  DAY, HOUR, MINUTE, MIN_SPAN, ROUND_STEPS, SECOND, WEEK, aggsFor, alignedWindows, bandLabel, annotateTimes, columnsOf, csvName,
  describeProblem, endsAtNow, explainProblem, formatAgo, formatCount, formatDuration, formatExact, formatHash,
  formatOffset, formatTime, formatValue, groupingText, isTime, labelsText, legendText, lineNames, lineSlots,
  linearScale, matchQuery, mergeMatchPages, mergePages, nearestIndex, panRange, parseDuration, parseHash,
  parseRetryAfter, partialWhy, pointsQuery, rangeParams, readableURL, resolutionError, roundStep, runs,
  selectionRange, seriesOf, tierSlots, timeOf, timeTicks, toCSV, uncovered, valueTicks, visibleSeries, zoomRange,
} from "./static/assets/lib.js";
import {
  acceptCompletion, completionContext, lexSelector, matchesEmpty, narrowingSelector, quoteValue, rankSuggestions,
  suggestionSource,
} from "./static/assets/selector.js";

const utc = () => 0;
const fixed = (ms) => () => ms;
const T0 = Date.UTC(2026, 0, 15, 14, 37, 22, 123); // a Thursday

const wall = (t, offset) => new Date(t + offset(t));
const iso = (t) => new Date(t).toISOString();

describe("durations", () => {
  it("parses the API's units", () => {
    assert.equal(parseDuration("250ms"), 250);
    assert.equal(parseDuration("90s"), 90 * SECOND);
    assert.equal(parseDuration("5m"), 5 * MINUTE);
    assert.equal(parseDuration("1h30m"), 90 * MINUTE);
    assert.equal(parseDuration("1d"), DAY);
    assert.equal(parseDuration("2w"), 14 * DAY);
    for (const bad of ["", "5", "m", "1.5h", "-1h", "1y", "5 m", null, undefined]) assert.ok(Number.isNaN(parseDuration(bad)), String(bad));
  });
  it("formats compactly and round-trips", () => {
    assert.equal(formatDuration(0), "0s");
    assert.equal(formatDuration(300000), "5m");
    assert.equal(formatDuration(5400000), "1h30m");
    assert.equal(formatDuration(DAY), "1d");
    assert.equal(formatDuration(7 * DAY), "7d");
    assert.equal(formatDuration(1500), "1s500ms");
    for (const ms of [1000, 61000, 3 * HOUR, 36 * HOUR, 90 * DAY]) assert.equal(parseDuration(formatDuration(ms)), ms);
  });
});

describe("time formatting", () => {
  it("writes instants in UTC or a given zone", () => {
    assert.equal(formatTime(T0), "2026-01-15 14:37:22.123");
    assert.equal(formatTime(Date.UTC(2026, 0, 15, 14, 37)), "2026-01-15 14:37");
    assert.equal(formatTime(Date.UTC(2026, 0, 15, 14, 37, 5)), "2026-01-15 14:37:05");
    assert.equal(formatTime(Date.UTC(2026, 0, 15, 14, 37), utc, true), "2026-01-15 14:37:00.000");
    assert.equal(formatTime(T0, fixed(5.5 * HOUR)), "2026-01-15 20:07:22.123");
    assert.equal(formatTime(T0, fixed(-10 * HOUR)), "2026-01-15 04:37:22.123");
  });
  it("names offsets", () => {
    assert.equal(formatOffset(0), "UTC+00:00");
    assert.equal(formatOffset(5.5 * HOUR), "UTC+05:30");
    assert.equal(formatOffset(-3.5 * HOUR), "UTC-03:30");
  });
  it("says how long ago", () => {
    assert.equal(formatAgo(T0, T0 + 2 * SECOND), "now");
    assert.equal(formatAgo(T0, T0 + 42 * SECOND), "42s ago");
    assert.equal(formatAgo(T0, T0 + 5 * MINUTE + 10), "5m ago");
    assert.equal(formatAgo(T0, T0 + 3 * DAY), "3d ago");
    assert.equal(formatAgo(T0 + 3 * MINUTE, T0), "in 3m");
  });
  it("groups counts", () => {
    assert.equal(formatCount(0), "0");
    assert.equal(formatCount(999), "999");
    assert.equal(formatCount(1234567), "1,234,567");
  });
});

describe("time-axis ticks", () => {
  it("picks round steps that fit the width", () => {
    const from = Date.UTC(2026, 0, 15, 13, 52);
    const { step, ticks } = timeTicks(from, from + HOUR, 1000, { offset: utc });
    assert.deepEqual([step.unit, step.n], ["m", 10]);
    assert.deepEqual(ticks.map((t) => t.label), ["14:00", "14:10", "14:20", "14:30", "14:40", "14:50"]);
    assert.ok(ticks.length <= 1000 / 90);
    // Narrower: fewer, coarser ticks.
    const narrow = timeTicks(from, from + HOUR, 300, { offset: utc });
    assert.deepEqual(narrow.ticks.map((t) => t.label), ["14:00", "14:30"]);
  });

  it("never yields more ticks than the width allows, at any span", () => {
    for (const span of [50, 5 * SECOND, 15 * MINUTE, 6 * HOUR, 7 * DAY, 90 * DAY, 400 * DAY, 30 * 365 * DAY]) {
      for (const width of [120, 500, 1400]) {
        const { ticks } = timeTicks(T0 - span, T0, width, { offset: utc, minSpacing: 90 });
        assert.ok(ticks.length >= 1, `span ${span} width ${width}: no tick`);
        assert.ok(ticks.length <= Math.max(2, Math.floor(width / 90)), `span ${span} width ${width}: ${ticks.length} ticks`);
        for (let i = 1; i < ticks.length; i++) assert.ok(ticks[i].t > ticks[i - 1].t);
        for (const t of ticks) assert.ok(t.t >= T0 - span && t.t <= T0);
      }
    }
  });

  it("puts the date under the first tick and where the day changes", () => {
    const from = Date.UTC(2026, 0, 15, 20, 0);
    const { ticks } = timeTicks(from, from + 8 * HOUR, 800, { offset: utc });
    assert.deepEqual(ticks.map((t) => [t.label, t.context]), [
      ["20:00", "Jan 15"], ["21:00", ""], ["22:00", ""], ["23:00", ""],
      ["00:00", "Jan 16"], ["01:00", ""], ["02:00", ""], ["03:00", ""], ["04:00", ""],
    ]);
  });

  it("follows the local time of a zone with a half-hour offset", () => {
    const ist = fixed(5.5 * HOUR);
    const from = Date.UTC(2026, 0, 15, 0, 0);
    const { ticks } = timeTicks(from, from + 6 * HOUR, 600, { offset: ist });
    assert.equal(ticks[0].label, "06:00");
    for (const t of ticks) {
      assert.equal(wall(t.t, ist).getUTCMinutes(), 0, iso(t.t));
      assert.equal((t.t / MINUTE) % 60, 30, "UTC minutes are :30 in India");
    }
  });

  it("stays on round local hours across a daylight-saving change", () => {
    // Central Europe: UTC+1, then UTC+2 from 2026-03-29 01:00 UTC.
    const change = Date.UTC(2026, 2, 29, 1, 0);
    const cet = (t) => (t >= change ? 2 * HOUR : HOUR);
    const from = Date.UTC(2026, 2, 28, 20, 0);
    const { ticks } = timeTicks(from, from + 12 * HOUR, 1300, { offset: cet });
    const labels = ticks.map((t) => t.label);
    assert.ok(labels.includes("01:00") && labels.includes("03:00"), labels.join(" "));
    assert.ok(!labels.includes("02:00"), "02:00 does not exist that night");
    assert.equal(new Set(ticks.map((t) => t.t)).size, ticks.length);
    for (const t of ticks) assert.equal(wall(t.t, cet).getUTCMinutes(), 0);
  });

  it("uses local midnights for days, with the year as context", () => {
    const ny = fixed(-5 * HOUR);
    const to = Date.UTC(2026, 0, 15, 14, 0);
    const { step, ticks } = timeTicks(to - 7 * DAY, to, 1000, { offset: ny });
    assert.equal(step.unit, "d");
    assert.equal(ticks[0].label, "Jan 9");
    assert.equal(ticks[0].context, "2026");
    assert.equal(ticks[1].context, "");
    for (const t of ticks) {
      const w = wall(t.t, ny);
      assert.equal(w.getUTCHours() + w.getUTCMinutes(), 0, iso(t.t));
    }
  });

  it("starts weeks on Mondays", () => {
    const to = Date.UTC(2026, 2, 1);
    const { step, ticks } = timeTicks(to - 60 * DAY, to, 900, { offset: utc });
    assert.equal(step.unit, "w");
    for (const t of ticks) assert.equal(new Date(t.t).getUTCDay(), 1, iso(t.t));
  });

  it("uses months and years for long ranges", () => {
    const to = Date.UTC(2026, 4, 20);
    const months = timeTicks(to - 365 * DAY, to, 1200, { offset: utc });
    assert.equal(months.step.unit, "mo");
    assert.deepEqual(months.ticks.map((t) => t.label), ["Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Jan", "Feb", "Mar", "Apr", "May"]);
    assert.deepEqual(months.ticks.filter((t) => t.context).map((t) => `${t.label} ${t.context}`), ["Jun 2025", "Jan 2026"]);
    const years = timeTicks(Date.UTC(2001, 5, 1), Date.UTC(2026, 5, 1), 1000, { offset: utc });
    assert.equal(years.step.unit, "y");
    assert.ok(years.ticks.every((t) => /^\d{4}$/.test(t.label) && Number(t.label) % years.step.n === 0));
  });

  it("shows seconds and milliseconds for short spans", () => {
    const from = Date.UTC(2026, 0, 15, 14, 0, 0);
    assert.equal(timeTicks(from, from + 30 * SECOND, 600, { offset: utc }).ticks[1].label, "14:00:05");
    assert.equal(timeTicks(from, from + 900, 600, { offset: utc }).ticks[1].label, "14:00:00.200");
  });

  it("gives nothing for an empty range or width", () => {
    assert.deepEqual(timeTicks(T0, T0, 500).ticks, []);
    assert.deepEqual(timeTicks(T0, T0 + HOUR, 0).ticks, []);
  });
});

describe("value axis", () => {
  it("finds round ticks covering the data", () => {
    assert.deepEqual(valueTicks(0, 97, 5), { min: 0, max: 100, step: 20, ticks: [0, 20, 40, 60, 80, 100] });
    const t = valueTicks(18.43, 18.98, 6);
    assert.equal(t.step, 0.1);
    assert.deepEqual(t.ticks, [18.4, 18.5, 18.6, 18.7, 18.8, 18.9, 19]);
    const neg = valueTicks(-3.2, 7.9, 5);
    assert.deepEqual([neg.min, neg.max, neg.step], [-5, 10, 5]);
  });
  it("widens a flat range around its value", () => {
    const t = valueTicks(21.5, 21.5);
    assert.ok(t.min < 21.5 && t.max > 21.5);
    const z = valueTicks(0, 0);
    assert.ok(z.min < 0 && z.max > 0);
  });
  it("has no floating-point noise in ticks", () => {
    for (const t of valueTicks(0.1, 0.7, 6).ticks) assert.equal(String(t).length <= 4, true, String(t));
  });
  it("survives missing data", () => {
    assert.deepEqual(valueTicks(Infinity, -Infinity).ticks.length > 1, true);
  });
  it("labels values with the step's precision and SI suffixes", () => {
    assert.equal(formatValue(18.4, 0.1), "18.4");
    assert.equal(formatValue(20, 20), "20");
    assert.equal(formatValue(2500, 500), "2500");
    assert.equal(formatValue(25000, 5000), "25k");
    assert.equal(formatValue(1500000, 500000), "1.5M");
    assert.equal(formatValue(3e9, 1e9), "3G");
    assert.equal(formatValue(0.25, 0.05), "0.25");
    assert.equal(formatValue(-0.0000001, 0.1), "0.0");
    assert.equal(formatValue(0, 20000, 60000), "0");
    // One unit for the whole axis.
    assert.deepEqual([0, 5000, 10000, 15000].map((v) => formatValue(v, 5000, 15000)), ["0", "5k", "10k", "15k"]);
    assert.deepEqual([0, 2500, 5000].map((v) => formatValue(v, 2500, 5000)), ["0", "2500", "5000"]);
    assert.equal(formatExact(21.499999999), "21.5");
    assert.equal(formatExact(1e-9), "1e-9");
  });
});

describe("linear scale", () => {
  it("maps values to pixels with y growing downward", () => {
    const y = linearScale(0, 100, 300, 20);
    assert.equal(y(0), 300);
    assert.equal(y(100), 20);
    assert.equal(y(50), 160);
    assert.equal(y(150), -120); // beyond the domain: beyond the range
    assert.equal(y.invert(160), 50);
    assert.equal(y.invert(y(37.5)), 37.5);
  });
  it("maps times to x", () => {
    const x = linearScale(T0, T0 + HOUR, 64, 1064);
    assert.equal(x(T0 + 30 * MINUTE), 564);
    assert.equal(x.invert(1064), T0 + HOUR);
  });
  it("maps a degenerate domain to the middle", () => {
    const s = linearScale(5, 5, 0, 100);
    assert.equal(s(5), 50);
    assert.equal(s(99), 50);
    assert.equal(s.invert(10), 5);
  });
});

describe("URL hash state", () => {
  it("has defaults", () => {
    const { state, invalid } = parseHash("");
    assert.deepEqual(invalid, []);
    assert.equal(state.series, "");
    assert.equal(state.range, "1h");
    assert.equal(state.res, "auto");
    assert.equal(state.agg, "avg");
    assert.equal(state.band, true);
    assert.equal(formatHash(state), "#range=1h");
  });
  it("reads every field", () => {
    const { state, invalid } = parseHash("#series=demo.cpu.host1&range=24h&res=5m&agg=max&band=0&refresh=1&plan=1");
    assert.deepEqual(invalid, []);
    assert.deepEqual(
      [state.series, state.range, state.res, state.agg, state.band, state.refresh, state.plan],
      ["demo.cpu.host1", "24h", "5m", "max", false, "10s", true],
      "refresh=1 of older links is the old fixed 10s",
    );
    for (const r of ["5s", "10s", "30s", "1m", "5m"]) assert.equal(parseHash("#refresh=" + r).state.refresh, r);
    assert.equal(parseHash("#refresh=off").state.refresh, "");
    assert.deepEqual(parseHash("#refresh=7s").invalid, ["refresh"]);
  });
  it("round-trips", () => {
    for (const h of [
      "#series=a&range=15m",
      "#series=sensor-1%3Aroom_2&range=1y&res=raw",
      "#series=x&from=2026-01-15T10%3A00%3A00Z&to=2026-01-15T12%3A00%3A00Z&res=90s&agg=count",
      "#series=x&from=now-3d&res=1h&band=0&refresh=30s",
      "#series=x&range=7d&refresh=5m&plan=1",
      "#series=a&overlay=b%2Cc&hide=a%2Cc&range=6h",
      "#series=x&from=1768487842123&to=1768491442123",
    ]) {
      assert.equal(formatHash(parseHash(h).state), h);
    }
  });
  it("makes a range with from custom, and ignores to without from", () => {
    const c = parseHash("#series=x&range=6h&from=now-3d&to=now-1d").state;
    assert.deepEqual([c.range, c.from, c.to], ["custom", "now-3d", "now-1d"]);
    assert.deepEqual(rangeParams(c), { from: "now-3d", to: "now-1d" });
    assert.equal(endsAtNow(c), false);
    const n = parseHash("#series=x&to=now-1d").state;
    assert.deepEqual([n.range, n.to], ["1h", ""]);
    assert.equal(endsAtNow(n), true);
  });
  it("keeps auto-refresh only for ranges that end now", () => {
    const fixedRange = parseHash("#series=x&from=now-3d&to=now-1d&refresh=1").state;
    assert.equal(fixedRange.refresh, "10s");
    assert.equal(formatHash(fixedRange), "#series=x&from=now-3d&to=now-1d");
  });
  it("names invalid values and keeps their defaults", () => {
    const { state, invalid } = parseHash("#series=bad%20id&range=2h&res=3x&agg=median&from=yesterday&band=yes");
    assert.deepEqual(invalid, ["series", "range", "from", "res", "agg", "band"]);
    assert.deepEqual([state.series, state.range, state.res, state.agg, state.from, state.band], ["", "1h", "auto", "avg", "", true]);
    assert.equal(parseHash("#res=500ms").invalid[0], "res", "windows are at least 1s");
  });
  it("accepts the API's time forms", () => {
    for (const ok of ["now", "now-15m", "1768487842123", "2026-01-15T14:37:22Z", "2026-01-15T14:37:22.123+05:30", "2026-01-15T14:37Z"]) {
      assert.ok(isTime(ok), ok);
    }
    for (const bad of ["", "yesterday", "now+1h", "2026-01-15", "2026-01-15 14:37:22"]) assert.ok(!isTime(bad), bad);
  });
});

describe("overlaid series", () => {
  it("keeps the selected series first, overlays once, and hides by legend", () => {
    const { state, invalid } = parseHash("#series=a&overlay=b,a,c,b&hide=b");
    assert.deepEqual(invalid, []);
    assert.deepEqual(seriesOf(state), ["a", "b", "c"]);
    assert.deepEqual(visibleSeries(state), ["a", "c"]);
    assert.deepEqual(parseHash("#series=a&overlay=b,bad%20id").invalid, ["overlay"]);
    assert.deepEqual(seriesOf(parseHash("#overlay=b").state), ["b"], "an overlay alone still draws");
  });
  it("writes only hidden series that are on the chart", () => {
    const { state } = parseHash("#series=a&overlay=b");
    assert.equal(formatHash({ ...state, hidden: ["b", "zz"] }), "#series=a&overlay=b&hide=b&range=1h");
  });
});

describe("selector in the URL", () => {
  it("reads the selector, its grouping and the lines hidden", () => {
    const { state, invalid } = parseHash("#match=cpu%7Bdc%3D%22eu%22%7D&group_by=dc,%20host&hide=e2e.a&hidegroup=%7Bdc%3D%22eu%22%7D&hidegroup=%7B%7D&range=6h");
    assert.deepEqual(invalid, []);
    assert.deepEqual([state.match, state.groupBy, state.hidden, state.hiddenGroups], ['cpu{dc="eu"}', ["dc", "host"], ["e2e.a"], ['{dc="eu"}', "{}"]]);
    assert.deepEqual(seriesOf(state), [], "no series picked: the selector's only");
    assert.deepEqual(parseHash("#match=cpu&group_by=").state.groupBy, [], "empty: one group of all");
    assert.equal(parseHash("#match=cpu").state.groupBy, null, "absent: one line per series");
  });
  it("round-trips", () => {
    for (const h of [
      "#match=cpu&range=1h",
      "#match=cpu%7Bdc%3D%22eu%22%7D&group_by=dc%2Chost&hide=e2e.a&hidegroup=%7Bdc%3D%22eu%22%7D&range=6h",
      "#match=cpu&group_by=&hidegroup=%7B%7D&range=1h",
      "#series=a&overlay=b&match=%7Bjob%21%3D%22x%22%2Cz%3D%22y%22%7D&from=now-3d&res=1h",
    ]) {
      assert.equal(formatHash(parseHash(h).state), h);
    }
  });
  it("keeps nothing of a grouping without a selector, and names invalid values", () => {
    assert.equal(formatHash(parseHash("#group_by=dc&hidegroup=x&series=a").state), "#series=a&range=1h");
    assert.deepEqual(parseHash("#match=cpu&group_by=1x").invalid, ["group_by"]);
    assert.deepEqual(parseHash("#match=cpu&group_by=a%20b").invalid, ["group_by"]);
    assert.deepEqual(parseHash("#match=%20").invalid, ["match"]);
    assert.deepEqual(parseHash("#match=" + "x".repeat(5000)).invalid, ["match"]);
    // Without a selector, only hidden series on the chart are kept; with
    // one, any may be among its series.
    assert.equal(formatHash({ ...parseHash("#series=a").state, hidden: ["zz"] }), "#series=a&range=1h");
    assert.equal(formatHash({ ...parseHash("#match=cpu").state, hidden: ["zz"] }), "#match=cpu&hide=zz&range=1h");
  });
  it("asks for the selector's series with the chart's parameters", () => {
    const now = Date.UTC(2026, 0, 15, 14, 37, 22, 123);
    const grouped = parseHash('#match=cpu{dc="eu"}&group_by=dc&from=2026-01-10T00:00:00Z&to=2026-01-11T00:00:00Z').state;
    assert.equal(matchQuery(grouped, 1000, now).toString(),
      "match=cpu%7Bdc%3D%22eu%22%7D&group_by=dc&" + pointsQuery(grouped, 1000, now).toString());
    assert.equal(matchQuery(parseHash("#match=cpu&group_by=&res=raw").state, 900).toString(), "match=cpu&group_by=&from=now-1h&to=now&resolution=raw");
    assert.equal(matchQuery(parseHash("#match=cpu&res=5m").state, 900).get("group_by"), null);
  });
  it("shows requests readably", () => {
    const q = new URLSearchParams({ match: 'cpu{dc="eu", host=~"a.*"}', group_by: "dc,host", from: "2026-01-10T00:00:00Z" });
    assert.equal(readableURL("v1/points?" + q), 'v1/points?match=cpu{dc="eu", host=~"a.*"}&group_by=dc,host&from=2026-01-10T00:00:00Z');
    assert.equal(readableURL("v1/points?match=a%26b%2Bc"), "v1/points?match=a%26b%2Bc", "& and + stay escaped");
  });
  it("follows a selector read's cursor, and stops where a page brings nothing new", async (t) => {
    const api = await import("./static/assets/api.js");
    const saved = globalThis.fetch;
    t.after(() => (globalThis.fetch = saved));
    const page = (points, covered, next) => ({
      results: [{ series: "a", labels: {}, columns: ["t", "v"], points }], partial: !points.length, covered, next_cursor: next, stats: {},
    });
    const pages = [page([[1, 1]], [0, 2], "c1"), page([[2, 2]], [0, 3], "c2"), page([], [0, 3], "c3"), page([], [0, 3], "c4")];
    const urls = [];
    globalThis.fetch = async (url) => {
      urls.push(url);
      return new Response(JSON.stringify(pages[urls.length - 1]));
    };
    const r = await api.readPages("v1/points", new URLSearchParams({ match: "cpu" }), { pageLimit: 10 });
    assert.deepEqual(urls, ["v1/points?match=cpu&limit=10", "v1/points?match=cpu&limit=10&cursor=c1", "v1/points?match=cpu&limit=10&cursor=c2"]);
    assert.deepEqual([r.pages.length, r.stuck, r.capped, r.url], [3, true, false, urls[0]]);
  });
});

describe("window ladder", () => {
  const LADDER = "1s 2s 5s 10s 15s 30s 1m 2m 5m 10m 15m 30m 1h 2h 3h 6h 12h 1d 2d 7d".split(" ").map(parseDuration);
  it("is the API's ladder", () => assert.deepEqual(ROUND_STEPS, LADDER));
  it("picks the smallest round step at least the need, then multiples of 7d", () => {
    assert.equal(roundStep(1), SECOND);
    assert.equal(roundStep(SECOND), SECOND);
    assert.equal(roundStep(SECOND + 1), 2 * SECOND);
    assert.equal(roundStep(29 * MINUTE), 30 * MINUTE, "30m, never 29m");
    assert.equal(roundStep(7 * DAY), WEEK);
    assert.equal(roundStep(7 * DAY + 1), 2 * WEEK);
    assert.equal(roundStep(20 * DAY), 3 * WEEK);
    // Brute force: the answer is on the ladder (or a multiple of 7d), at
    // least the need, and the next smaller candidate is below it.
    const candidates = [...LADDER, ...Array.from({ length: 1001 }, (_, i) => (i + 2) * WEEK)];
    for (let k = 0; k < 2000; k++) {
      const need = Math.exp(Math.random() * Math.log(1000 * WEEK));
      const got = roundStep(need);
      const want = candidates.find((c) => c >= need);
      assert.equal(got, want, `need ${need}`);
    }
  });
  it("asks for whole windows: from aligned down, the same step kept", () => {
    // The server's choice for a request, as API.md describes it.
    const serverStep = (from, to, maxPoints) => roundStep((to - from) / maxPoints);
    for (let k = 0; k < 3000; k++) {
      const to = Date.UTC(2026, 0, 1) + Math.floor(Math.random() * 365 * DAY);
      const span = Math.max(SECOND, Math.floor(Math.exp(Math.random() * Math.log(400 * DAY))));
      const from = to - span;
      const width = 50 + Math.floor(Math.random() * 2000);
      const w = alignedWindows(from, to, width);
      assert.equal(w.step, roundStep(span / width));
      assert.equal(w.from % w.step, 0, "aligned to the epoch");
      assert.ok(w.from <= from && from - w.from < w.step, "the window holding from");
      assert.equal(serverStep(w.from, w.to, w.maxPoints), w.step, `span ${span} width ${width}`);
      assert.ok(w.maxPoints <= width + 2);
    }
  });
  it("resolves relative times against the clock", () => {
    assert.equal(timeOf("now", T0), T0);
    assert.equal(timeOf("now-15m", T0), T0 - 15 * MINUTE);
    assert.equal(timeOf("now-2w", T0), T0 - 2 * WEEK);
    assert.equal(timeOf("1768487842123", T0), 1768487842123);
    assert.equal(timeOf("2026-01-15T14:37:22.123Z", 0), T0);
    assert.ok(Number.isNaN(timeOf("yesterday", T0)));
  });
});

describe("queries", () => {
  const st = (h) => parseHash(h).state;
  it("asks for whole windows with auto: absolute times, from aligned down, max_points to keep the step", () => {
    const now = Date.UTC(2026, 0, 15, 14, 37, 22, 123);
    const q = pointsQuery(st("#series=x&range=24h"), 974.4, now);
    // 24h / 974 = 88.7s → 2m windows; from aligned down to 2m.
    const from = Math.floor((now - DAY) / (2 * MINUTE)) * 2 * MINUTE;
    assert.equal(q.toString(), `from=${from}&to=${now}&resolution=auto&max_points=${Math.floor((now - from) / (2 * MINUTE)) + 1}&agg=min%2Cmax%2Cavg`);
    const abs = pointsQuery(st("#series=x&from=2026-01-10T00:00:00Z&to=2026-01-11T00:00:00Z"), 1000, now);
    assert.equal(abs.get("from"), String(Date.UTC(2026, 0, 10)), "an aligned from stays");
    assert.equal(abs.get("max_points"), "721");
  });
  it("asks for no aggregates with raw, and no max_points with a window", () => {
    assert.equal(pointsQuery(st("#series=x&range=1h&res=raw"), 900).toString(), "from=now-1h&to=now&resolution=raw");
    assert.equal(pointsQuery(st("#series=x&range=1y&res=1d&agg=max"), 900).toString(), "from=now-365d&to=now&resolution=1d&agg=min%2Cmax");
  });
  it("draws no band for sum and count, or when it is off", () => {
    assert.deepEqual(aggsFor(st("#agg=sum")), ["sum"]);
    assert.deepEqual(aggsFor(st("#agg=count")), ["count"]);
    assert.deepEqual(aggsFor(st("#agg=avg&band=0")), ["avg"]);
    assert.deepEqual(aggsFor(st("#agg=min")), ["min", "max"]);
  });
  it("bounds a percentile band by the percentiles it names, for any aggregate on the values' scale", () => {
    assert.deepEqual(aggsFor(st("#agg=p99&band_of=p5-p95")), ["p5", "p95", "p99"]);
    assert.deepEqual(aggsFor(st("#agg=p95&band_of=p5-p95")), ["p5", "p95"]);
    assert.deepEqual(aggsFor(st("#agg=avg&band_of=p25-p75")), ["p25", "p75", "avg"]);
    assert.deepEqual(aggsFor(st("#agg=p50")), ["min", "max", "p50"]);
    assert.deepEqual(aggsFor(st("#agg=count&band_of=p5-p95")), ["count"]);
    assert.deepEqual(aggsFor(st("#agg=p99&band=0&band_of=p5-p95")), ["p99"]);
    assert.equal(bandLabel("p5-p95"), "p5–p95");
    assert.equal(bandLabel("nonsense"), "min–max");
    const { state, invalid } = parseHash("#series=x&agg=p999&band_of=p1-p99");
    assert.deepEqual(invalid, ["band_of"]);
    assert.deepEqual([state.agg, state.bandOf], ["p999", "minmax"]);
    for (const hash of ["#series=x&range=1h&agg=p99&band_of=p5-p95", "#series=x&range=1h&agg=p50&band_of=p25-p75"]) {
      assert.equal(formatHash(parseHash(hash).state), hash);
    }
    assert.equal(formatHash(parseHash("#series=x&range=1h&band=0&band_of=p5-p95").state), "#series=x&range=1h&band=0");
  });
});

describe("answers", () => {
  it("finds the nearest point", () => {
    const ts = [10, 20, 30, 50];
    assert.equal(nearestIndex(ts, 0), 0);
    assert.equal(nearestIndex(ts, 14), 0);
    assert.equal(nearestIndex(ts, 15), 0);
    assert.equal(nearestIndex(ts, 16), 1);
    assert.equal(nearestIndex(ts, 41), 3);
    assert.equal(nearestIndex(ts, 99), 3);
    assert.equal(nearestIndex([], 5), -1);
    assert.equal(nearestIndex(new Float64Array([1, 2, 3]), 2.2), 1);
  });
  it("breaks lines at gaps, not at sparse windows", () => {
    const every10s = Array.from({ length: 10 }, (_, i) => i * 10 * SECOND);
    assert.deepEqual(runs(every10s, SECOND), [[0, 10]], "10s data in 1s windows is one line");
    const outage = [0, 60, 120, 180, 3600, 3660].map((s) => s * SECOND);
    assert.deepEqual(runs(outage, MINUTE), [[0, 4], [4, 6]]);
    assert.deepEqual(runs([5], 0), [[0, 1]]);
    assert.deepEqual(runs([], 0), []);
  });
  it("merges pages", () => {
    const head = { series: "s", from: 0, to: 100, tier: "raw", resolution_ms: 0, columns: ["t", "v"], segments: [{ from: 0, to: 100, tier: "raw" }] };
    const stats = (n) => ({ buckets: 1, partitions: 2, rows_read: n, cache_hits: 0, elapsed_ms: 1.5 });
    const a = mergePages([
      { ...head, points: [[1, 1], [2, 2]], partial: true, partial_reason: "slo", covered: [0, 3], next_cursor: "c1", stats: stats(2), warnings: ["w"] },
      { ...head, points: [[3, 3]], partial: false, covered: [0, 100], stats: stats(1), warnings: ["w", "no points before 1794703119131"] },
      { ...head, points: [], partial: false, covered: [0, 100], stats: stats(0), warnings: ["no points before 1794703119200"] },
    ]);
    assert.deepEqual(a.points, [[1, 1], [2, 2], [3, 3]]);
    assert.deepEqual(a.stats, { buckets: 3, partitions: 6, rows_read: 3, cache_hits: 0, elapsed_ms: 4.5 });
    assert.deepEqual([a.pages, a.pagesCutShort, a.partial, a.covered, a.next_cursor], [3, 1, false, [0, 100], undefined]);
    assert.deepEqual(a.warnings, ["w", "no points before 1794703119131"], "a warning repeated with another time is shown once");
    assert.equal(mergePages([]), null);
  });
  it("splits rows into columns", () => {
    const { t, cols } = columnsOf({ columns: ["t", "min", "max", "avg"], points: [[1, 0, 2, 1], [2, 1, 5, 3]] });
    assert.deepEqual([...t], [1, 2]);
    assert.deepEqual(Object.keys(cols), ["min", "max", "avg"]);
    assert.deepEqual([...cols.max], [2, 5]);
  });
  it("finds the uncovered part of the range", () => {
    assert.deepEqual(uncovered(0, 100, [0, 100]), []);
    assert.deepEqual(uncovered(0, 100, [0, 60]), [[60, 100]]);
    assert.deepEqual(uncovered(0, 100, [30, 100]), [[0, 30]]);
    assert.deepEqual(uncovered(0, 100, [0, 0]), [[0, 100]]);
    assert.deepEqual(uncovered(0, 100, undefined), []);
  });
  it("adds readable times to the gateway's messages", () => {
    assert.equal(annotateTimes("minute tier keeps 30d; no points before 1765800000000", utc),
      "minute tier keeps 30d; no points before 1765800000000 (2025-12-15 12:00)");
    assert.equal(annotateTimes("42 rows, 17 buckets", utc), "42 rows, 17 buckets");
  });
  it("describes problems", () => {
    const p = describeProblem(400, "Bad Request", {
      type: "/docs#problem/invalid-parameter", title: "Invalid parameter", status: 400, detail: "from: required",
      errors: [{ param: "from", message: "required" }],
    });
    assert.deepEqual(p, {
      title: "Invalid parameter", status: 400, type: "/docs#problem/invalid-parameter", detail: "from: required",
      errors: [{ param: "from", message: "required" }], retryAfter: null,
    });
    const q = describeProblem(502, "Bad Gateway", null);
    assert.equal(q.title, "Bad Gateway");
    assert.equal(q.status, 502);
    assert.match(q.detail, /502/);
  });
});

describe("error messages", () => {
  const problem = (status, type, extra = {}) => describeProblem(status, "", { type, title: "T", status, detail: "D", ...extra.body }, extra.retryAfter);
  it("says the latency budget ran out, not that the store failed", () => {
    const x = explainProblem(problem(504, "/docs#problem/budget-exceeded"));
    assert.equal(x.title, "Latency budget ran out");
    assert.doesNotMatch(x.title + x.detail, /store/);
    assert.match(partialWhy("slo"), /latency budget ran out/);
    assert.match(partialWhy("unavailable"), /store failed/);
  });
  it("asks for a token on 401 and names the role on 403", () => {
    assert.equal(explainProblem(problem(401, "/docs#problem/unauthorized")).title, "Token needed");
    const x = explainProblem(problem(403, "/docs#problem/forbidden"));
    assert.equal(x.title, "Role too low");
    assert.match(x.detail, /role/);
    // A blocked series is a 403 too, with the gateway's own reason.
    const blocked = explainProblem(describeProblem(403, "", { type: "/docs#problem/series-blocked", title: "Series blocked", detail: "blocked: migrating" }));
    assert.deepEqual([blocked.title, blocked.detail], ["Series blocked", "blocked: migrating"]);
  });
  it("says the gateway is busy and when to retry on 503 overloaded", () => {
    assert.match(explainProblem(problem(503, "/docs#problem/overloaded", { retryAfter: "3" })).detail, /busy.*Retry in 3 seconds/s);
    assert.match(explainProblem(problem(503, "https://x.example/problems/overloaded", { retryAfter: null })).detail, /Retry in a moment/);
    assert.equal(explainProblem(problem(503, "/docs#problem/store-unavailable")).title, "T", "a store failure keeps its own words");
  });
  it("reads Retry-After as seconds or a date", () => {
    assert.equal(parseRetryAfter("7"), 7);
    assert.equal(parseRetryAfter(null), null);
    assert.equal(parseRetryAfter("Thu, 15 Jan 2026 14:37:30 GMT", Date.UTC(2026, 0, 15, 14, 37, 22)), 8);
    assert.equal(parseRetryAfter("soon"), null);
  });
  it("explains a refused resolution in words", () => {
    assert.equal(resolutionError("5m"), "");
    assert.equal(resolutionError("auto"), "");
    assert.match(resolutionError("3x"), /“3x” is not a resolution: use auto, raw/);
    assert.match(resolutionError("500ms"), /shorter than a second/);
    assert.match(resolutionError(""), /not a resolution/);
  });
  it("names unknown series", () => {
    assert.equal(explainProblem(problem(404, "/docs#problem/series-not-found")).title, "Unknown series");
  });
});

describe("zoom and pan", () => {
  it("keeps the instant under the pointer in place", () => {
    for (let k = 0; k < 1000; k++) {
      const from = Math.floor(Math.random() * 1e12);
      const to = from + 2 * SECOND + Math.floor(Math.random() * 1e10);
      const at = from + Math.random() * (to - from);
      const factor = Math.exp((Math.random() - 0.5) * 3);
      const r = zoomRange(from, to, at, factor);
      assert.ok(r.to - r.from >= MIN_SPAN);
      if ((to - from) * factor >= MIN_SPAN) {
        assert.ok(Math.abs(r.to - r.from - (to - from) * factor) <= 1);
        const before = (at - from) / (to - from);
        const after = (at - r.from) / (r.to - r.from);
        assert.ok(Math.abs(before - after) < 1e-6 + 2 / (r.to - r.from), `${before} vs ${after}`);
      }
      assert.ok(Number.isInteger(r.from) && Number.isInteger(r.to));
    }
  });
  it("never zooms below a second, pans by whole ms and needs a real selection", () => {
    assert.equal(zoomRange(0, 2000, 1000, 0.01).to - zoomRange(0, 2000, 1000, 0.01).from, MIN_SPAN);
    assert.deepEqual(panRange(1000, 5000, 250.4), { from: 1250, to: 5250 });
    assert.deepEqual(panRange(1000, 5000, -1000), { from: 0, to: 4000 });
    assert.deepEqual(selectionRange(9000.6, 1000.2), { from: 1000, to: 9001 });
    assert.equal(selectionRange(1000, 1500), null);
  });
});

describe("CSV export", () => {
  it("writes every point of every answer under one header", () => {
    const a = { series: "a", columns: ["t", "min", "max", "avg"], points: [[T0, 1, 2.5, 1.75], [T0 + MINUTE, -0.1, 1e21, 3]] };
    const b = { series: "b", columns: ["t", "min", "max", "avg"], points: [[T0, 0.30000000000000004, 7, 5]] };
    assert.equal(toCSV([a, b]), [
      "series,t,time,min,max,avg",
      `a,${T0},2026-01-15T14:37:22.123Z,1,2.5,1.75`,
      `a,${T0 + MINUTE},2026-01-15T14:38:22.123Z,-0.1,1e+21,3`,
      `b,${T0},2026-01-15T14:37:22.123Z,0.30000000000000004,7,5`,
      "",
    ].join("\n"));
    assert.equal(toCSV([{ series: "r", columns: ["t", "v"], points: [] }]), "series,t,time,v\n");
  });
  it("reads back to the answers' numbers exactly", () => {
    const points = Array.from({ length: 500 }, (_, i) => [T0 + i * SECOND, Math.random() * 1e6 - 5e5, (Math.random() - 0.5) * 1e-8]);
    const lines = toCSV([{ series: "x", columns: ["t", "min", "max"], points }]).trimEnd().split("\n").slice(1);
    assert.deepEqual(lines.map((l) => l.split(",")).map((f) => [Number(f[1]), Number(f[3]), Number(f[4])]), points);
  });
  it("names the file after the series and range", () => {
    assert.equal(csvName(["a:b"], Date.UTC(2026, 0, 10), Date.UTC(2026, 0, 11)), "tsgate-a_b-2026-01-10T000000Z-2026-01-11T000000Z.csv");
    assert.equal(csvName(["a", "b", "c"], 0, 1000), "tsgate-a+2-1970-01-01T000000Z-1970-01-01T000001Z.csv");
  });
});

describe("tiers", () => {
  it("colour tiers by their position in the server's list", () => {
    assert.deepEqual(tierSlots([{ name: "raw" }, { name: "minute" }, { name: "hour" }, { name: "day" }]), { raw: 0, minute: 1, hour: 2, day: 3 });
    assert.deepEqual(tierSlots([{ name: "raw" }, { name: "10s" }, { name: "week" }]), { raw: 0, "10s": 1, week: 2 });
    assert.deepEqual(tierSlots(undefined), {});
  });
});

describe("bearer token", () => {
  it("asks once on 401, keeps the token in session storage and sends it on every call after", async (t) => {
    const api = await import("./static/assets/api.js");
    const store = new Map();
    const saved = { fetch: globalThis.fetch, sessionStorage: globalThis.sessionStorage };
    t.after(() => Object.assign(globalThis, saved));
    globalThis.sessionStorage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, String(v)), removeItem: (k) => store.delete(k) };
    const sent = [];
    let role = "read";
    globalThis.fetch = async (url, init) => {
      const auth = init.headers.Authorization ?? "";
      sent.push([url, auth]);
      const json = (status, body, headers = {}) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
      if (auth !== "Bearer s3cret") return json(401, { type: "/docs#problem/unauthorized", title: "Unauthorized", status: 401, detail: "a bearer token is needed" }, { "WWW-Authenticate": "Bearer" });
      if (url.startsWith("v1/admin") && role === "read") return json(403, { type: "/docs#problem/forbidden", title: "Forbidden", status: 403, detail: "role read" });
      return json(200, { url });
    };
    let asked = 0;
    api.onUnauthorized(async (problem) => {
      asked++;
      assert.equal(problem.status, 401);
      await new Promise((r) => setTimeout(r, 5));
      return "s3cret";
    });
    const [a, b] = await Promise.all([api.getJSON("v1/series"), api.getJSON("v1/series/x")]);
    assert.deepEqual([a.url, b.url], ["v1/series", "v1/series/x"]);
    assert.equal(asked, 1, "concurrent 401s share one question");
    assert.equal(store.get("tsgate.token"), "s3cret");
    sent.length = 0;
    await api.getJSON("v1/series/y/points");
    assert.deepEqual(sent, [["v1/series/y/points", "Bearer s3cret"]], "sent from the start once stored");
    // 403 asks nothing: the role is too low.
    await assert.rejects(api.getJSON("v1/admin/blocked"), (e) => e.problem.status === 403 && explainProblem(e.problem).title === "Role too low");
    assert.equal(asked, 1);
    // Cancelling the question fails the call with the 401.
    api.setToken("");
    api.onUnauthorized(async () => null);
    await assert.rejects(api.getJSON("v1/series"), (e) => e.problem.status === 401 && explainProblem(e.problem).title === "Token needed");
    assert.equal(store.has("tsgate.token"), false);
  });
  it("reads Retry-After of a 503", async (t) => {
    const api = await import("./static/assets/api.js");
    const saved = globalThis.fetch;
    t.after(() => (globalThis.fetch = saved));
    globalThis.fetch = async () => new Response(JSON.stringify({ type: "/docs#problem/overloaded", title: "Overloaded", status: 503, detail: "busy" }), { status: 503, headers: { "Retry-After": "2" } });
    await assert.rejects(api.getJSON("v1/series"), (e) => e.problem.retryAfter === 2 && /Retry in 2 seconds/.test(explainProblem(e.problem).detail));
  });
});

describe("selector completion", () => {
  // The context at the caret, marked | in the text.
  const at = (marked) => completionContext(marked.replace("|", ""), marked.indexOf("|"));
  const pick = (c, ...keys) => Object.fromEntries(keys.map((k) => [k, c[k]]));
  const dc = { name: "dc", op: "=", value: "eu" };

  it("suggests metric names before the braces", () => {
    assert.deepEqual(pick(at("|"), "kind", "prefix", "from", "to"), { kind: "metric", prefix: "", from: 0, to: 0 });
    assert.deepEqual(pick(at("cp|"), "kind", "prefix", "from", "to"), { kind: "metric", prefix: "cp", from: 0, to: 2 });
    const c = at('c|pu{dc="eu"}');
    assert.deepEqual(pick(c, "kind", "prefix", "from", "to", "matchers"), { kind: "metric", prefix: "c", from: 0, to: 3, matchers: [dc] });
    assert.equal(at('|{dc="eu"}').kind, "metric", "a name may go before braces");
  });
  it("suggests label names after { or , and values after name= or name=~", () => {
    assert.deepEqual(pick(at("cpu{|"), "kind", "prefix", "from", "to", "metric", "used", "closed"),
      { kind: "name", prefix: "", from: 4, to: 4, metric: "cpu", used: ["__name__"], closed: false });
    assert.deepEqual(pick(at("cpu{d|"), "kind", "prefix", "from", "to"), { kind: "name", prefix: "d", from: 4, to: 5 });
    assert.deepEqual(pick(at('cpu{dc="eu", h|}'), "kind", "prefix", "from", "to", "matchers", "used", "closed"),
      { kind: "name", prefix: "h", from: 13, to: 14, matchers: [dc], used: ["dc", "__name__"], closed: true });
    assert.deepEqual(pick(at("{|}"), "kind", "metric", "used"), { kind: "name", metric: "", used: [] });
    assert.deepEqual(pick(at("cpu{h|ost=\"a\"}"), "kind", "prefix", "from", "to"), { kind: "name", prefix: "h", from: 4, to: 8 }, "the whole name is replaced");

    assert.deepEqual(pick(at("cpu{dc=|"), "kind", "label", "op", "prefix", "from", "to", "matchers", "closed"),
      { kind: "value", label: "dc", op: "=", prefix: "", from: 7, to: 7, matchers: [], closed: false });
    assert.deepEqual(pick(at('cpu{dc=~"e|'), "kind", "op", "prefix", "from", "to"), { kind: "value", op: "=~", prefix: "e", from: 8, to: 10 });
    assert.deepEqual(pick(at('cpu{dc!="e|u"}'), "kind", "op", "prefix", "from", "to"), { kind: "value", op: "!=", prefix: "e", from: 8, to: 12 });
    assert.deepEqual(pick(at("cpu{dc = e|}"), "kind", "prefix", "from", "to"), { kind: "value", prefix: "e", from: 9, to: 10 }, "unquoted, spaced");
    assert.deepEqual(pick(at('{dc="eu", host="a", zone=|}'), "kind", "label", "matchers"),
      { kind: "value", label: "zone", matchers: [dc, { name: "host", op: "=", value: "a" }] }, "narrowed by the other matchers");
    assert.deepEqual(pick(at('{dc="|eu", host="a"}'), "label", "prefix", "matchers"), { label: "dc", prefix: "", matchers: [{ name: "host", op: "=", value: "a" }] }, "not by its own");
  });
  it("suggests nothing where nothing fits", () => {
    for (const m of ['cpu{dc="eu"|}', 'cpu{dc="eu"}|', "cpu{dc |", "cpu{dc!|", 'cpu |{dc="eu"}', "rate(cpu|", 'cpu{dc="eu" x=|}']) assert.equal(at(m), null, m);
  });
  it("reads quoted strings as PromQL does", () => {
    const strs = (text) => lexSelector(text).filter((t) => t.type === "str").map((t) => [t.value, t.closed]);
    assert.deepEqual(strs(String.raw`{a="x\"y\\", b='z', c=` + "`r\\n`" + String.raw`, d="\u00e9\x41\n", e="open`), [
      ['x"y\\', true], ["z", true], ["r\\n", true], ["éA\n", true], ["open", false],
    ]);
    assert.deepEqual(lexSelector("a!~b").map((t) => t.type), ["ident", "op", "ident"]);
  });

  it("narrows suggestions with what would select on its own", () => {
    assert.equal(narrowingSelector({ metric: "cpu", matchers: [] }), "cpu");
    assert.equal(narrowingSelector({ metric: "", matchers: [dc] }), '{dc="eu"}');
    assert.equal(narrowingSelector({ metric: "cpu", matchers: [dc, { name: "h", op: "=~", value: "a|b" }] }), 'cpu{dc="eu", h=~"a|b"}');
    assert.equal(narrowingSelector({ metric: "", matchers: [{ name: "dc", op: "!=", value: "eu" }] }), "", "matches the empty string: the API refuses it alone");
    assert.equal(narrowingSelector({ metric: "", matchers: [{ name: "dc", op: "=~", value: ".*" }, { name: "h", op: "=", value: "a" }] }), '{dc=~".*", h="a"}');
    assert.equal(narrowingSelector({ metric: "cpu", matchers: [{ name: "dc", op: "=~", value: "(?i)eu" }] }), "cpu", "a regular expression JavaScript cannot read is left out");
    assert.equal(narrowingSelector({}), "");
  });
  it("knows which matchers let the empty value through", () => {
    const m = (op, value) => matchesEmpty({ op, value });
    assert.deepEqual([m("=", ""), m("=", "a"), m("!=", "a"), m("!=", "")], [true, false, true, false]);
    assert.deepEqual([m("=~", "a|"), m("=~", ".+"), m("!~", ".+"), m("!~", ""), m("=~", "(")], [true, false, true, false, true]);
  });
  it("asks the label API, narrowed by match", () => {
    assert.deepEqual(suggestionSource(at("cpu{|")), { url: "v1/labels?match=cpu", field: "labels", add: ["series"], exclude: ["__name__"] });
    assert.deepEqual(suggestionSource(at('cpu{host="a", dc=|')),
      { url: "v1/labels/dc/values?match=" + encodeURIComponent('cpu{host="a"}'), field: "values", add: [], exclude: [] });
    assert.equal(suggestionSource(at("{dc=|")).url, "v1/labels/dc/values", "nothing to narrow with: every value");
    assert.equal(suggestionSource(at("|")).url, "v1/labels/__name__/values");
    assert.equal(suggestionSource(at("{series=|")), null, "every id is the series list's to page through");
    assert.equal(suggestionSource(at("cpu{series=|")).url, "v1/labels/series/values?match=cpu");
  });
  it("ranks what starts with the typed text first, then what holds it", () => {
    assert.deepEqual(rankSuggestions(["__name__", "dc", "host", "series"], "s"), ["series", "host"]);
    assert.deepEqual(rankSuggestions(["EU-west", "us-east", "eu"], "eu"), ["EU-west", "eu"]);
    assert.deepEqual(rankSuggestions(["a", "b"], ""), ["a", "b"]);
    assert.equal(rankSuggestions(Array.from({ length: 80 }, (_, i) => `v${i}`), "v").length, 50);
  });
  it("takes a suggestion: names as typed, values quoted and the braces closed", () => {
    const take = (marked, item) => {
      const r = acceptCompletion(marked.replace("|", ""), at(marked), item);
      return r.text.slice(0, r.caret) + "|" + r.text.slice(r.caret);
    };
    assert.equal(take("cpu{d|", "dc"), "cpu{dc|");
    assert.equal(take('cpu{h|ost="a"}', "dc"), 'cpu{dc|="a"}');
    assert.equal(take("cpu{dc=|", "eu"), 'cpu{dc="eu"|}');
    assert.equal(take("cpu{dc=|}", "eu"), 'cpu{dc="eu"|}');
    assert.equal(take('cpu{dc="e|", h="a"}', "eu"), 'cpu{dc="eu"|, h="a"}');
    assert.equal(take("cpu{dc=e|}", "eu"), 'cpu{dc="eu"|}');
    assert.equal(take("cpu{dc=~|", "a.b|c"), String.raw`cpu{dc=~"a\\.b\\|c"|}`);
    assert.equal(take("c|", "cpu"), "cpu|");
    assert.equal(quoteValue('say "hi"\\', "="), String.raw`"say \"hi\"\\"`);
  });
  it("takes any value so that the selector reads it back", () => {
    const chars = ['"', "\\", "'", "`", "\n", "é", "a", " ", ",", "}", "{", ".", "*", "|", "\u0001"];
    for (let k = 0; k < 500; k++) {
      const v = Array.from({ length: 1 + Math.floor(Math.random() * 8) }, () => chars[Math.floor(Math.random() * chars.length)]).join("");
      const { text } = acceptCompletion("cpu{x=", at("cpu{x=|"), v);
      const str = lexSelector(text).find((t) => t.type === "str");
      assert.equal(str.value, v, text);
      assert.equal(text.endsWith("}"), true);
    }
  });
});

describe("lines of a selector", () => {
  it("writes labels as PromQL does", () => {
    assert.equal(labelsText({ host: "a", __name__: "cpu", dc: "eu" }), 'cpu{dc="eu", host="a"}');
    assert.equal(labelsText({ __name__: "cpu" }), "cpu");
    assert.equal(labelsText({ dc: "eu" }), '{dc="eu"}');
    assert.equal(labelsText({}), "{}");
    assert.equal(labelsText({ v: 'a"b' }), String.raw`{v="a\"b"}`);
  });
  it("names series by their labels or id, groups by theirs", () => {
    assert.deepEqual(lineNames([
      { series: "plain", labels: {} },
      { series: "cpu.a", labels: { __name__: "cpu", host: "a" } },
      { group: { dc: "eu" }, series_count: 2 },
      { group: {}, series_count: 4 },
      { group: { zone: "" }, series_count: 1 },
    ]), ["plain", 'cpu{host="a"}', '{dc="eu"}', "all series", '{zone=""}']);
    assert.deepEqual(lineNames([
      { series: "s1", labels: { __name__: "cpu" } }, { series: "s2", labels: { __name__: "cpu" } }, { series: "s3", labels: { __name__: "mem" } },
    ]), ["cpu s1", "cpu s2", "mem"], "the same labels twice: the ids tell them apart");
  });
  it("writes legend entries with the series a group folds, and the aggregate of a lone line", () => {
    assert.equal(legendText({ name: '{dc="eu"}', group: true, seriesCount: 2, aggregated: true }), '{dc="eu"} · 2 series');
    assert.equal(legendText({ name: "all series", group: true, seriesCount: 1234, aggregated: true }, { single: true, agg: "avg" }), "all series · 1,234 series · avg");
    assert.equal(legendText({ name: "cpu.a", aggregated: true }, { single: true, agg: "max" }), "cpu.a · max");
    assert.equal(legendText({ name: "cpu.a", aggregated: false }, { single: true, agg: "max" }), "cpu.a", "raw points have no aggregate");
    assert.equal(groupingText(null), "");
    assert.equal(groupingText([]), "one group");
    assert.equal(groupingText(["dc", "host"]), "by dc, host");
  });
  it("colours each line by its key, the same on every read, distinct while there are colours", () => {
    const keys = ["cpu.a", "cpu.b", '{dc="eu"}', '{dc="us"}', "x", "y", "z"];
    const slots = lineSlots(keys);
    assert.deepEqual(lineSlots(keys), slots);
    assert.equal(new Set(slots).size, keys.length);
    for (let k = 0; k < 300; k++) {
      const n = 1 + Math.floor(Math.random() * 10);
      const ks = Array.from({ length: n }, (_, i) => `k${Math.random()}-${i}`);
      const taken = [0, 1].slice(0, Math.max(0, 10 - n));
      const s = lineSlots(ks, taken);
      assert.equal(new Set([...s, ...taken]).size, n + taken.length, "no colour twice, none of the picked series'");
      assert.ok(s.every((x) => x >= 0 && x < 10));
      // The first line's colour does not depend on the lines after it.
      assert.equal(lineSlots(ks.slice(0, 1), taken)[0], s[0]);
    }
    assert.equal(lineSlots(Array.from({ length: 25 }, (_, i) => `s${i}`)).length, 25, "more lines than colours: colours repeat");
  });
  it("merges a selector read's pages per result", () => {
    const head = (series) => ({ series, labels: { __name__: "cpu", host: series }, tier: "fine", resolution_ms: 60_000, columns: ["t", "avg"], segments: [] });
    const stats = (n) => ({ buckets: 1, partitions: 2, rows_read: n, cache_hits: 0, elapsed_ms: 1 });
    const m = mergeMatchPages([
      { results: [{ ...head("a"), points: [[1, 1], [2, 2]] }, { ...head("b"), points: [[1, 5]] }], partial: false, covered: [0, 3], next_cursor: "c", stats: stats(3) },
      { results: [{ ...head("a"), points: [[3, 3]] }, { ...head("b"), points: [] }], partial: false, covered: [0, 10], stats: stats(1), warnings: ["w"] },
    ], { from: 0, to: 10 });
    assert.deepEqual(m.results.map((r) => [r.key, r.name, r.points, r.seriesCount]), [
      ["a", 'cpu{host="a"}', [[1, 1], [2, 2], [3, 3]], 1], ["b", 'cpu{host="b"}', [[1, 5]], 1],
    ]);
    const r = m.results[1];
    assert.deepEqual([r.from, r.to, r.covered, r.pages, r.partial, r.next_cursor, r.stats.rows_read, r.warnings], [0, 10, [0, 10], 2, false, undefined, 4, ["w"]]);
    assert.equal(m.matched, 2);
    const g = mergeMatchPages([{ results: [{ group: { dc: "eu" }, series_count: 3, columns: ["t", "avg"], points: [] }, { group: { dc: "us" }, series_count: 1, columns: ["t", "avg"], points: [] }], covered: [0, 1], stats: {} }]);
    assert.deepEqual(g.results.map((x) => [x.key, x.seriesCount]), [['{dc="eu"}', 3], ['{dc="us"}', 1]]);
    assert.equal(g.matched, 4);
    assert.equal(mergeMatchPages([]), null);
  });
});

describe("modules", () => {
  const dir = new URL("./static/assets/", import.meta.url);
  for (const name of readdirSync(dir).filter((f) => f.endsWith(".js"))) {
    it(`${name} parses`, () => {
      // The modules that need a DOM cannot run here, but they can be parsed.
      execFileSync(process.execPath, ["--check", new URL(name, dir).pathname], { stdio: "pipe" });
    });
  }
  it("chart.js loads without a DOM", async () => {
    const chart = await import("./static/assets/chart.js");
    assert.equal(typeof chart.Chart, "function");
  });
});
