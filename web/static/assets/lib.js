// Pure helpers of the dashboard: durations, time-axis ticks, value ticks and
// scaling, the state kept in the URL hash, and the shaping of answers for
// drawing. Nothing here touches the DOM or the network, so Node's test runner
// checks it (web/dashboard.test.mjs).
//
// Local time is handled as "wall time": an instant t plus the offset of the
// local time zone at t, read with the Date UTC getters. The offset is passed
// in (a function of t), so tests can use any zone and daylight-saving rule.

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const WEEK = 7 * DAY;

const UNITS = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY, w: WEEK };

/** Offset of the browser's time zone at instant t, in ms (UTC+1 is +3600000). */
export function localOffset(t) {
  return -new Date(t).getTimezoneOffset() * MINUTE;
}

// ---------------------------------------------------------------- durations

/**
 * Parses a duration the way the API writes them ("250ms", "90s", "5m",
 * "1h30m", "1d", "2w"). Returns milliseconds, or NaN when s is not one.
 */
export function parseDuration(s) {
  if (typeof s !== "string" || !/^(\d+(ms|s|m|h|d|w))+$/.test(s)) return NaN;
  let ms = 0;
  for (const [, n, unit] of s.matchAll(/(\d+)(ms|s|m|h|d|w)/g)) ms += Number(n) * UNITS[unit];
  return ms;
}

/** Writes ms as a compact duration: 300000 → "5m", 5400000 → "1h30m", 0 → "0s". */
export function formatDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms === 0) return "0s";
  let rest = Math.round(ms);
  let out = "";
  for (const [unit, size] of [["d", DAY], ["h", HOUR], ["m", MINUTE], ["s", SECOND], ["ms", 1]]) {
    if (rest >= size) {
      out += Math.floor(rest / size) + unit;
      rest %= size;
    }
  }
  return out;
}

// ---------------------------------------------------------------- formatting

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad = (n, w = 2) => String(n).padStart(w, "0");

function wallParts(t, offset) {
  const d = new Date(t + offset(t));
  return {
    y: d.getUTCFullYear(), mo: d.getUTCMonth(), d: d.getUTCDate(),
    h: d.getUTCHours(), mi: d.getUTCMinutes(), s: d.getUTCSeconds(), ms: d.getUTCMilliseconds(),
  };
}

/** "UTC+05:30" for an offset in ms. */
export function formatOffset(off) {
  const sign = off < 0 ? "-" : "+";
  const m = Math.abs(Math.round(off / MINUTE));
  return `UTC${sign}${pad(Math.floor(m / 60))}:${pad(m % 60)}`;
}

/**
 * An instant as "2026-01-15 14:37:22.123" in the zone of offset (UTC when
 * offset is omitted). Milliseconds and seconds are left out when zero,
 * unless full is set.
 */
export function formatTime(t, offset = () => 0, full = false) {
  const p = wallParts(t, offset);
  let s = `${p.y}-${pad(p.mo + 1)}-${pad(p.d)} ${pad(p.h)}:${pad(p.mi)}`;
  if (full || p.s || p.ms) s += `:${pad(p.s)}`;
  if (full || p.ms) s += `.${pad(p.ms, 3)}`;
  return s;
}

/** A short date-time for lists: "Jan 15 14:37", with the year when it is not the current one's. */
export function formatShort(t, now, offset = localOffset) {
  const p = wallParts(t, offset);
  const year = p.y !== wallParts(now, offset).y ? ` ${p.y}` : "";
  return `${MONTHS[p.mo]} ${p.d}${year} ${pad(p.h)}:${pad(p.mi)}`;
}

/** How long ago t was, coarsely: "now", "42s ago", "5m ago", "3h ago", "2d ago" ("in 3m" ahead). */
export function formatAgo(t, now) {
  const d = Math.abs(now - t);
  if (d < 5 * SECOND) return "now";
  for (const [unit, size] of [["d", DAY], ["h", HOUR], ["m", MINUTE], ["s", SECOND]]) {
    if (d >= size) {
      const n = `${Math.floor(d / size)}${unit}`;
      return t > now ? `in ${n}` : `${n} ago`;
    }
  }
  return "now";
}

/** Integers with thin grouping: 1234567 → "1,234,567". */
export function formatCount(n) {
  if (!Number.isFinite(n)) return String(n);
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/**
 * A value for an axis whose ticks are step apart and reach up to extent in
 * magnitude: as many decimals as the step needs, and k/M/G/T suffixes when
 * the axis reaches 10,000 or more (chosen by the axis, so that all its
 * labels share a unit).
 */
export function formatValue(v, step = 0, extent = Math.abs(v)) {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const mag = Math.max(Math.abs(extent), Math.abs(v), Math.abs(step));
  for (const [suffix, size] of [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e4]]) {
    if (mag >= size) {
      const unit = size === 1e4 ? 1e3 : size;
      const scaledStep = step ? step / unit : 0;
      const dec = scaledStep ? Math.min(6, Math.max(0, -Math.floor(Math.log10(scaledStep) + 1e-9))) : 1;
      return trimZero((v / unit).toFixed(dec)) + (unit === 1e3 ? "k" : suffix);
    }
  }
  const dec = step ? Math.min(10, Math.max(0, -Math.floor(Math.log10(step) + 1e-9))) : 0;
  let s = step ? v.toFixed(dec) : String(+v.toPrecision(6));
  if (s === "-0" || /^-0\.0*$/.test(s)) s = s.slice(1);
  return s;
}

function trimZero(s) {
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}

/** A value for a tooltip: up to 6 significant digits, no exponent for ordinary magnitudes. */
export function formatExact(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e15 || a < 1e-6)) return v.toExponential(5).replace(/\.?0+e/, "e");
  return String(+v.toPrecision(a >= 1e6 ? 12 : 6));
}

// ---------------------------------------------------------------- time ticks

// Candidate tick intervals, finest first. Fixed ones are whole milliseconds
// in wall time; months and years follow the calendar.
const TIME_STEPS = [
  ...[1, 2, 5, 10, 20, 50, 100, 200, 500].map((n) => ({ unit: "ms", n, ms: n })),
  ...[1, 2, 5, 10, 15, 30].map((n) => ({ unit: "s", n, ms: n * SECOND })),
  ...[1, 2, 5, 10, 15, 30].map((n) => ({ unit: "m", n, ms: n * MINUTE })),
  ...[1, 2, 3, 6, 12].map((n) => ({ unit: "h", n, ms: n * HOUR })),
  ...[1, 2].map((n) => ({ unit: "d", n, ms: n * DAY })),
  { unit: "w", n: 1, ms: WEEK },
  ...[1, 2, 3, 6].map((n) => ({ unit: "mo", n, ms: n * 30.44 * DAY })),
  ...[1, 2, 5, 10, 20, 50, 100].map((n) => ({ unit: "y", n, ms: n * 365.25 * DAY })),
];

/** Converts a wall time back to the instant it names in the zone of offset. */
function fromWall(wall, offset) {
  const guess = wall - offset(wall);
  return wall - offset(guess);
}

/**
 * Ticks of a time axis over [from, to] drawn width pixels wide, at least
 * minSpacing pixels apart, on round boundaries of the local time of offset.
 *
 * Returns {step, ticks}: step names the interval ({unit, n, ms}); each tick
 * is {t, label, context}: label is the time of day, day, month or year,
 * and context is the coarser part (the date under times of day, the year
 * under days and months) on the first tick and wherever it changes, else "".
 */
export function timeTicks(from, to, width, { offset = localOffset, minSpacing = 90 } = {}) {
  if (!(to > from) || !(width > 0)) return { step: null, ticks: [] };
  const maxTicks = Math.max(2, Math.floor(width / minSpacing));
  const span = to - from;
  const step = TIME_STEPS.find((s) => span / s.ms <= maxTicks) ?? TIME_STEPS[TIME_STEPS.length - 1];
  const ts = [];
  const push = (t) => {
    if (t >= from && t <= to && (ts.length === 0 || t > ts[ts.length - 1])) ts.push(t);
  };
  const wallFrom = from + offset(from);
  const wallTo = to + offset(to);
  if (step.unit === "mo" || step.unit === "y") {
    const d = new Date(wallFrom);
    let y = d.getUTCFullYear();
    let m = step.unit === "y" ? 0 : d.getUTCMonth() - (d.getUTCMonth() % step.n);
    if (step.unit === "y") y -= y % step.n;
    for (let i = 0; i < 10000; i++) {
      const wall = Date.UTC(y, m, 1);
      if (wall > wallTo + DAY) break;
      push(fromWall(wall, offset));
      if (step.unit === "y") y += step.n;
      else m += step.n;
    }
  } else {
    // Weeks start on Mondays: 1970-01-05 was one.
    const phase = step.unit === "w" ? 4 * DAY : 0;
    let wall = Math.ceil((wallFrom - phase) / step.ms) * step.ms + phase;
    for (let i = 0; wall <= wallTo + HOUR && i < 10000; i++, wall += step.ms) push(fromWall(wall, offset));
  }
  let prevContext = "";
  const ticks = ts.map((t) => {
    const p = wallParts(t, offset);
    let label;
    let context;
    switch (step.unit) {
      case "ms":
        label = `${pad(p.h)}:${pad(p.mi)}:${pad(p.s)}.${pad(p.ms, 3)}`;
        context = `${MONTHS[p.mo]} ${p.d}`;
        break;
      case "s":
        label = `${pad(p.h)}:${pad(p.mi)}:${pad(p.s)}`;
        context = `${MONTHS[p.mo]} ${p.d}`;
        break;
      case "m":
      case "h":
        label = `${pad(p.h)}:${pad(p.mi)}`;
        context = `${MONTHS[p.mo]} ${p.d}`;
        break;
      case "d":
      case "w":
        label = `${MONTHS[p.mo]} ${p.d}`;
        context = String(p.y);
        break;
      case "mo":
        label = MONTHS[p.mo];
        context = String(p.y);
        break;
      default:
        label = String(p.y);
        context = "";
    }
    const shown = context !== prevContext ? context : "";
    prevContext = context;
    return { t, label, context: shown };
  });
  return { step, ticks };
}

// ---------------------------------------------------------------- values

/**
 * Round ticks covering [lo, hi], about count of them, at 1, 2 or 5 times a
 * power of ten. Returns {min, max, step, ticks} where [min, max] is the
 * covered range widened to whole steps. A flat range is widened around
 * its value.
 */
export function valueTicks(lo, hi, count = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return { min: 0, max: 1, step: 0.2, ticks: [0, 0.2, 0.4, 0.6, 0.8, 1] };
  if (lo > hi) [lo, hi] = [hi, lo];
  if (hi === lo) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  const min = Math.floor(lo / step + 1e-9) * step;
  const max = Math.ceil(hi / step - 1e-9) * step;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const ticks = [];
  for (let i = 0, v = min; v <= max + step / 2 && i < 1000; i++, v = min + i * step) {
    ticks.push(Number(v.toFixed(Math.min(20, decimals))));
  }
  return { min, max, step, ticks };
}

/**
 * The linear map from the domain [d0, d1] onto the range [r0, r1] (for a
 * y axis, r0 is the bottom pixel). Its invert goes back. A degenerate
 * domain maps everything to the middle of the range.
 */
export function linearScale(d0, d1, r0, r1) {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  const f = d1 === d0 ? () => (r0 + r1) / 2 : (v) => r0 + (v - d0) * k;
  f.invert = (p) => (k === 0 ? (d0 + d1) / 2 : d0 + (p - r0) / k);
  f.domain = [d0, d1];
  f.range = [r0, r1];
  return f;
}

// ---------------------------------------------------------------- answers

/** Index of the element of the ascending array ts nearest to t (-1 when empty). */
export function nearestIndex(ts, t) {
  let lo = 0;
  let hi = ts.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && t - ts[lo - 1] <= ts[lo] - t) return lo - 1;
  return lo;
}

/**
 * Splits ascending times into runs to draw as connected lines: a gap longer
 * than three times the usual spacing (the larger of the window and the
 * median distance between points) breaks the line, as no data was there.
 * Returns [start, end) index pairs.
 */
export function runs(ts, resolutionMs = 0) {
  const n = ts.length;
  if (n === 0) return [];
  const gaps = [];
  for (let i = 1; i < n; i++) gaps.push(ts[i] - ts[i - 1]);
  const sorted = gaps.slice().sort((a, b) => a - b);
  const median = sorted.length ? sorted[sorted.length >> 1] : 0;
  const limit = 3 * Math.max(resolutionMs, median);
  const out = [];
  let start = 0;
  for (let i = 1; i < n; i++) {
    if (gaps[i - 1] > limit) {
      out.push([start, i]);
      start = i;
    }
  }
  out.push([start, n]);
  return out;
}

/**
 * What the pages of one read share, from their trailers: the stats summed,
 * the warnings once each (pages repeat them, with times evaluated per
 * page), the number of pages and of pages a latency budget cut short, and
 * partial, covered and next_cursor of the last one.
 */
function mergeTrailers(pages) {
  const last = pages[pages.length - 1];
  const stats = { buckets: 0, partitions: 0, rows_read: 0, cache_hits: 0, elapsed_ms: 0 };
  const warnings = [];
  let cutShort = 0;
  for (const p of pages) {
    for (const k of Object.keys(stats)) stats[k] += Number(p.stats?.[k] ?? 0);
    for (const w of p.warnings ?? []) {
      const shape = w.replace(/\d+/g, "#");
      if (!warnings.some((x) => x.replace(/\d+/g, "#") === shape)) warnings.push(w);
    }
    if (p.partial && p.next_cursor) cutShort++;
  }
  return {
    warnings, stats, pages: pages.length, pagesCutShort: cutShort,
    partial: !!last.partial, partial_reason: last.partial_reason, covered: last.covered, next_cursor: last.next_cursor,
  };
}

/**
 * Merges the pages of one answer: the head (series, range, tier, columns,
 * segments, warnings) of the first page, the points of all pages, the
 * trailer (partial, covered) of the last one, and the stats summed.
 */
export function mergePages(pages) {
  if (pages.length === 0) return null;
  let points = [];
  for (const p of pages) points = points.length === 0 ? p.points : points.concat(p.points);
  return { ...pages[0], points, ...mergeTrailers(pages) };
}

/**
 * Merges the pages of a read by selector (GET /v1/points?match=): each
 * result (a series or a group) with its points of every page, in the order
 * results first came, and what the pages share (mergeTrailers) copied into
 * each result, with from and to of range (the answer has none), so that a
 * result reads like the answer of one series. Each result also gets its
 * key (resultKey), its name (lineNames) and seriesCount; the merged answer
 * has results and matched, the series read.
 */
export function mergeMatchPages(pages, { from, to } = {}) {
  if (pages.length === 0) return null;
  const byKey = new Map();
  for (const p of pages) {
    for (const r of p.results ?? []) {
      const key = resultKey(r);
      const prev = byKey.get(key);
      if (prev) prev.points = prev.points.length ? prev.points.concat(r.points) : r.points;
      else byKey.set(key, { ...r });
    }
  }
  const shared = { from, to, ...mergeTrailers(pages) };
  const results = [...byKey.values()];
  const names = lineNames(results);
  const merged = results.map((r, i) => ({
    ...r, ...shared, key: resultKey(r), name: names[i], seriesCount: r.group ? r.series_count ?? 0 : 1,
  }));
  return { ...shared, results: merged, matched: merged.reduce((n, r) => n + r.seriesCount, 0) };
}

// ---------------------------------------------------------------- labels

/**
 * A label set as PromQL writes it: the metric name (__name__) before the
 * braces, the other labels sorted by name, values quoted:
 * cpu{dc="eu", host="a"}; {} when there are none.
 */
export function labelsText(labels = {}) {
  const { __name__: metric = "", ...rest } = labels;
  const inner = Object.keys(rest).sort().map((k) => `${k}=${JSON.stringify(rest[k])}`).join(", ");
  return inner || !metric ? `${metric}{${inner}}` : metric;
}

/** The key of a result of a read by selector: the series id, or the text of the group's labels. */
export const resultKey = (r) => (r.group ? labelsText(r.group) : r.series);

/**
 * The names of the lines of a read by selector: a series by its labels
 * (its id when it has none, or when another series has the same labels:
 * then both labels and id), a group by its labels ("all series" for the
 * one group of all).
 */
export function lineNames(results) {
  const names = results.map((r) => {
    if (r.group) return Object.keys(r.group).length ? labelsText(r.group) : "all series";
    return r.labels && Object.keys(r.labels).length ? labelsText(r.labels) : r.series;
  });
  return names.map((n, i) => (!results[i].group && n !== results[i].series && names.indexOf(n) !== names.lastIndexOf(n) ? `${n} ${results[i].series}` : n));
}

/**
 * The text of a legend entry: the line's name, how many series a group
 * folds, and the aggregate drawn when the chart has only this line.
 */
export function legendText({ name, group = false, seriesCount = 1, aggregated = false }, { single = false, agg = "" } = {}) {
  let text = name;
  if (group) text += ` · ${formatCount(seriesCount)} series`;
  if (single && aggregated && agg) text += ` · ${agg}`;
  return text;
}

/** What the state groups by, in words: "" (one line per series), "one group", "by dc, host". */
export function groupingText(groupBy) {
  if (!groupBy) return "";
  return groupBy.length ? `by ${groupBy.join(", ")}` : "one group";
}

/** A 32-bit FNV-1a hash of a string's UTF-16 code units. */
function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * Colour slots (0 … n-1) for lines by their keys: each key's own slot (a
 * hash of it), so that a line keeps its colour from one read to the next
 * and when other lines come or go, moved on to the next free slot while
 * the key's would repeat one of taken or of an earlier key; with more
 * lines than slots, colours repeat.
 */
export function lineSlots(keys, taken = [], n = 10) {
  const used = new Set(taken.map((s) => s % n));
  return keys.map((k) => {
    let s = hash(k) % n;
    if (used.size < n) while (used.has(s)) s = (s + 1) % n;
    used.add(s);
    return s;
  });
}

/**
 * Adds a readable time after each Unix-millisecond timestamp in a message
 * of the gateway: "no points before 1765800000000" → "no points before
 * 1765800000000 (2025-12-15 12:00)".
 */
export function annotateTimes(text, offset = localOffset) {
  return String(text).replace(/\b1\d{12}\b/g, (ms) => `${ms} (${formatTime(Number(ms), offset)})`);
}

/**
 * Splits the answer's rows into columns: {t: Float64Array, cols: {name:
 * Float64Array}}. The names are the answer's columns after "t".
 */
export function columnsOf(answer) {
  const names = answer.columns.slice(1);
  const n = answer.points.length;
  const t = new Float64Array(n);
  const cols = Object.fromEntries(names.map((c) => [c, new Float64Array(n)]));
  for (let i = 0; i < n; i++) {
    const row = answer.points[i];
    t[i] = row[0];
    for (let j = 0; j < names.length; j++) cols[names[j]][i] = row[j + 1];
  }
  return { t, cols };
}

/**
 * The parts of [from, to) that an answer did not cover, given its covered
 * range [c0, c1]: zero, one or two [start, end) spans.
 */
export function uncovered(from, to, covered) {
  if (!covered || covered.length !== 2) return [];
  const [c0, c1] = covered;
  const out = [];
  if (c1 <= c0) return [[from, to]];
  if (c0 > from) out.push([from, Math.min(c0, to)]);
  if (c1 < to) out.push([Math.max(c1, from), to]);
  return out;
}

// ---------------------------------------------------------------- URL state

export const RANGES = ["15m", "1h", "6h", "24h", "7d", "30d", "90d", "1y"];
export const AGGS = ["avg", "min", "max", "sum", "count", "p50", "p90", "p95", "p99", "p999"];
/**
 * The bands the chart can shade, by name: the two aggregates that bound
 * them. The percentile bands come from the sketches the rollups keep, so
 * they cost a rollup read like min and max do.
 */
export const BANDS = Object.freeze({ minmax: ["min", "max"], "p5-p95": ["p5", "p95"], "p25-p75": ["p25", "p75"] });
/** What a band is called in the legend. */
export function bandLabel(name) {
  const [lo, hi] = BANDS[name] ?? BANDS.minmax;
  return `${lo}–${hi}`;
}
/** Whether the aggregate is drawn on the values' own scale, so that a band can go with it (not sum and count). */
export function bandable(agg) {
  return agg === "avg" || agg === "min" || agg === "max" || /^p\d/.test(agg);
}
export const REFRESH_INTERVALS = ["5s", "10s", "30s", "1m", "5m"];
export const DEFAULT_STATE = Object.freeze({
  series: "", overlay: [], hidden: [], match: "", groupBy: null, hiddenGroups: [], range: "1h", from: "", to: "", res: "auto",
  agg: "avg", band: true, bandOf: "minmax", refresh: "", plan: false,
});

const SERIES_ID = /^[A-Za-z0-9_.:-]{1,200}$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]{0,127}$/;
/** The longest selector a link may carry. */
export const MAX_SELECTOR = 4096;
const TIME = /^(now(-\d+(ms|s|m|h|d|w))?|\d{1,16}|\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d))$/;

/** Whether s is a time the API accepts: now, now-6h, Unix ms or RFC 3339. */
export function isTime(s) {
  return typeof s === "string" && TIME.test(s);
}

/** Whether s is a resolution the API accepts: auto, raw or a duration of at least 1s. */
export function isResolution(s) {
  return s === "auto" || s === "raw" || parseDuration(s) >= SECOND;
}

/** Range presets as milliseconds ("1y" is 365 days). */
export function rangeMs(range) {
  return range === "1y" ? 365 * DAY : parseDuration(range);
}

/**
 * Reads the dashboard's state from a URL hash such as
 * "#series=demo.cpu.host1&range=24h&res=5m&agg=max". Unknown keys are
 * ignored; a value that is not valid falls back to its default and is
 * named in the returned invalid list. A custom range has from (and
 * optionally to) instead of range. overlay lists the series drawn over
 * series (comma-separated), hide the ones toggled off in the legend;
 * refresh is an interval of REFRESH_INTERVALS ("1" of older links is 10s).
 * match is a selector whose series are drawn besides those; group_by (a
 * comma list of label names, empty for one group of all) groups them, and
 * hidegroup (repeated) names the groups toggled off, by their labels'
 * text; hide also names matched series toggled off.
 */
export function parseHash(hash) {
  const q = new URLSearchParams(String(hash ?? "").replace(/^#/, ""));
  const s = { ...DEFAULT_STATE };
  const invalid = [];
  const take = (key, ok, set) => {
    if (!q.has(key)) return;
    const v = q.get(key);
    if (ok(v)) set(v);
    else invalid.push(key);
  };
  take("series", (v) => SERIES_ID.test(v), (v) => (s.series = v));
  const ids = (v) => v.split(",").every((id) => SERIES_ID.test(id));
  take("overlay", ids, (v) => (s.overlay = [...new Set(v.split(","))].filter((id) => id !== s.series)));
  take("hide", ids, (v) => (s.hidden = [...new Set(v.split(","))]));
  take("match", (v) => v.trim() !== "" && v.length <= MAX_SELECTOR, (v) => (s.match = v.trim()));
  const names = (v) => v.split(",").map((n) => n.trim());
  take("group_by", (v) => v.trim() === "" || names(v).every((n) => LABEL_NAME.test(n)),
    (v) => (s.groupBy = v.trim() === "" ? [] : [...new Set(names(v))]));
  s.hiddenGroups = [...new Set(q.getAll("hidegroup").filter((k) => k && k.length <= MAX_SELECTOR))];
  if (!s.match) {
    s.groupBy = null;
    s.hiddenGroups = [];
  }
  take("range", (v) => RANGES.includes(v), (v) => (s.range = v));
  take("from", isTime, (v) => (s.from = v));
  take("to", isTime, (v) => (s.to = v));
  take("res", isResolution, (v) => (s.res = v));
  take("agg", (v) => AGGS.includes(v), (v) => (s.agg = v));
  take("band", (v) => v === "0" || v === "1", (v) => (s.band = v === "1"));
  take("band_of", (v) => Object.hasOwn(BANDS, v), (v) => (s.bandOf = v));
  take("refresh", (v) => v === "0" || v === "1" || v === "off" || REFRESH_INTERVALS.includes(v),
    (v) => (s.refresh = v === "1" ? "10s" : REFRESH_INTERVALS.includes(v) ? v : ""));
  take("plan", (v) => v === "0" || v === "1", (v) => (s.plan = v === "1"));
  if (s.from) s.range = "custom";
  else s.to = "";
  return { state: s, invalid };
}

/** Writes state as a hash ("#series=…&range=…"), leaving out defaults. */
export function formatHash(state) {
  const q = new URLSearchParams();
  if (state.series) q.set("series", state.series);
  const overlay = (state.overlay ?? []).filter((id) => id !== state.series);
  if (state.series && overlay.length) q.set("overlay", overlay.join(","));
  if (state.match) {
    q.set("match", state.match);
    if (state.groupBy) q.set("group_by", state.groupBy.join(","));
  }
  // With a selector, any series may be on the chart.
  const hidden = (state.hidden ?? []).filter((id) => state.match || id === state.series || overlay.includes(id));
  if (hidden.length) q.set("hide", hidden.join(","));
  if (state.match && state.groupBy) for (const k of state.hiddenGroups ?? []) q.append("hidegroup", k);
  if (state.range === "custom" && state.from) {
    q.set("from", state.from);
    if (state.to && state.to !== "now") q.set("to", state.to);
  } else {
    q.set("range", state.range || DEFAULT_STATE.range);
  }
  if (state.res && state.res !== "auto") q.set("res", state.res);
  if (state.agg && state.agg !== "avg") q.set("agg", state.agg);
  if (state.band === false) q.set("band", "0");
  else if (state.bandOf && state.bandOf !== DEFAULT_STATE.bandOf) q.set("band_of", state.bandOf);
  if (REFRESH_INTERVALS.includes(state.refresh) && endsAtNow(state)) q.set("refresh", state.refresh);
  if (state.plan) q.set("plan", "1");
  return "#" + q.toString();
}

/** The state's range as the API's from and to. */
export function rangeParams(state) {
  if (state.range === "custom" && state.from) return { from: state.from, to: state.to || "now" };
  return { from: "now-" + (state.range === "1y" ? "365d" : state.range), to: "now" };
}

/** Whether the state's range ends at the server's now (so refreshing it shows new data). */
export function endsAtNow(state) {
  const { to } = rangeParams(state);
  return to === "now";
}

/**
 * The aggregates to ask for: the chosen one, and the two that bound the
 * band when it is drawn (not for sum and count, which live on another
 * scale).
 */
export function aggsFor(state) {
  if (state.band !== false && bandable(state.agg)) {
    return [...(BANDS[state.bandOf] ?? BANDS.minmax), state.agg].filter((a, i, all) => all.indexOf(a) === i);
  }
  return [state.agg];
}

/** The series of the state in drawing order: the selected one, then the overlays. */
export function seriesOf(state) {
  return [state.series, ...(state.overlay ?? [])].filter((id, i, all) => id && all.indexOf(id) === i);
}

/** The series of the state that the legend has not toggled off. */
export function visibleSeries(state) {
  const hidden = new Set(state.hidden ?? []);
  return seriesOf(state).filter((id) => !hidden.has(id));
}

/**
 * The instant an API time names, resolving now and now-6h against the
 * given clock: "now", "now-15m", Unix ms or RFC 3339. NaN when s is none.
 */
export function timeOf(s, now) {
  if (!s || s === "now") return now;
  const rel = /^now-(\d+)(ms|s|m|h|d|w)$/.exec(s);
  if (rel) return now - Number(rel[1]) * UNITS[rel[2]];
  if (/^\d+$/.test(s)) return Number(s);
  return isTime(s) ? Date.parse(s) : NaN;
}

/**
 * The round window steps of the API's max_points rule, finest first; past
 * the last one the ladder goes on in whole multiples of 7d.
 */
export const ROUND_STEPS = [
  1, 2, 5, 10, 15, 30].map((n) => n * SECOND).concat(
  [1, 2, 5, 10, 15, 30].map((n) => n * MINUTE),
  [1, 2, 3, 6, 12].map((n) => n * HOUR),
  [1, 2, 7].map((n) => n * DAY));

/** The smallest round step of the ladder that is at least needMs. */
export function roundStep(needMs) {
  if (!(needMs > 0)) return SECOND;
  const s = ROUND_STEPS.find((step) => step >= needMs);
  return s ?? Math.ceil(needMs / WEEK) * WEEK;
}

/**
 * The window the gateway picks for max_points over [from, to) — before any
 * retention moves the read to a coarser tier — and the request that asks
 * for whole windows: the window holding from starts before from and would
 * not be returned, so from is aligned down to it (windows are aligned to the
 * epoch), and max_points is raised so the same step still fits. Returns
 * {from, to, step, maxPoints}.
 */
export function alignedWindows(from, to, maxPoints) {
  const step = roundStep((to - from) / Math.max(1, Math.floor(maxPoints)));
  const start = Math.floor(from / step) * step;
  // One spare window keeps the step when the span is an exact multiple,
  // where need would equal the step and any rounding could tip it over.
  return { from: start, to, step, maxPoints: Math.floor((to - start) / step) + 1 };
}

/**
 * The query of /points and /plan for the state. With resolution auto and
 * maxPoints the dashboard picks the window itself (alignedWindows) and
 * asks with absolute times resolved against now; maxPoints applies only to
 * auto (the API refuses it otherwise).
 */
export function pointsQuery(state, maxPoints, now = Date.now()) {
  const res = state.res || "auto";
  const range = rangeParams(state);
  const q = new URLSearchParams(range);
  if (res === "auto" && maxPoints > 0) {
    const from = timeOf(range.from, now);
    const to = timeOf(range.to, now);
    if (to > from) {
      const w = alignedWindows(from, to, Math.round(maxPoints));
      q.set("from", String(w.from));
      q.set("to", String(w.to));
      q.set("resolution", "auto");
      q.set("max_points", String(w.maxPoints));
    } else {
      q.set("resolution", "auto");
      q.set("max_points", String(Math.round(maxPoints)));
    }
  } else {
    q.set("resolution", res);
  }
  if (res !== "raw") q.set("agg", aggsFor(state).join(","));
  return q;
}

/**
 * The query of a read by selector (GET /v1/points, /v1/plan): match and
 * group_by (when the state groups), then pointsQuery's parameters.
 */
export function matchQuery(state, maxPoints, now = Date.now()) {
  const q = new URLSearchParams({ match: state.match });
  if (state.groupBy) q.set("group_by", state.groupBy.join(","));
  for (const [k, v] of pointsQuery(state, maxPoints, now)) q.set(k, v);
  return q;
}

/**
 * A request URL to read: the characters of selectors and lists that
 * URLSearchParams escapes shown as they are ({, }, ", =, ",", spaces …).
 */
export function readableURL(url) {
  return url.replace(/%(2C|3A|7B|7D|22|3D|7E|21|7C|2A|28|29|5B|5D|5E|24)/gi, (m) => decodeURIComponent(m)).replaceAll("+", " ");
}

/**
 * Why a resolution the user typed is refused, in words ("" when it is
 * one the API accepts).
 */
export function resolutionError(v) {
  if (isResolution(v)) return "";
  const ms = parseDuration(v);
  if (ms >= 0 && ms < SECOND) return `“${v}” is shorter than a second: windows are at least 1s.`;
  return `“${v}” is not a resolution: use auto, raw, or a window such as 90s, 5m, 1h, 1d.`;
}

// ---------------------------------------------------------------- zoom and pan

/** The shortest range zooming in reaches. */
export const MIN_SPAN = SECOND;

/**
 * The range [from, to) scaled by factor around the instant at (factor < 1
 * zooms in), keeping at the same fraction of the range, never shorter
 * than MIN_SPAN. Times are whole milliseconds.
 */
export function zoomRange(from, to, at, factor) {
  const span = Math.max(MIN_SPAN, Math.round((to - from) * factor));
  const frac = to > from ? Math.min(1, Math.max(0, (at - from) / (to - from))) : 0.5;
  const start = Math.round(at - frac * span);
  return { from: start, to: start + span };
}

/** The range [from, to) moved by deltaMs (later when positive). */
export function panRange(from, to, deltaMs) {
  const d = Math.round(deltaMs);
  return { from: from + d, to: to + d };
}

/** The range of a dragged selection between two instants, or null when it is too short to zoom into. */
export function selectionRange(a, b) {
  const from = Math.round(Math.min(a, b));
  const to = Math.round(Math.max(a, b));
  return to - from >= MIN_SPAN ? { from, to } : null;
}

// ---------------------------------------------------------------- export

const csvField = (s) => (/[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s);

/**
 * The CSV of answers (one per series, in the API's shape): a header
 * "series,t,time,<columns>", then one line per point of each answer in
 * order, t in Unix ms as the API gives it, time in RFC 3339 UTC, values as
 * JavaScript writes numbers (the shortest text that reads back the same).
 * Answers with other columns than the first one's keep their own values
 * under the shared header; missing ones are empty.
 */
export function toCSV(answers) {
  const cols = [];
  for (const a of answers) for (const c of a.columns.slice(1)) if (!cols.includes(c)) cols.push(c);
  const lines = [["series", "t", "time", ...cols].join(",")];
  for (const a of answers) {
    const idx = cols.map((c) => a.columns.indexOf(c));
    const id = csvField(a.series);
    for (const row of a.points) {
      const fields = [id, String(row[0]), new Date(row[0]).toISOString()];
      for (const j of idx) fields.push(j > 0 && row[j] !== null && row[j] !== undefined ? String(row[j]) : "");
      lines.push(fields.join(","));
    }
  }
  return lines.join("\n") + "\n";
}

/** A file name for the CSV of a range: "tsgate-<series>-<from>-<to>.csv". */
export function csvName(ids, from, to) {
  const stamp = (t) => new Date(t).toISOString().replace(/\.000Z$/, "Z").replaceAll(":", "");
  const first = ids[0].replace(/[^A-Za-z0-9_.-]/g, "_");
  const who = ids.length === 1 ? first : `${first}+${ids.length - 1}`;
  return `tsgate-${who}-${stamp(from)}-${stamp(to)}.csv`;
}

// ---------------------------------------------------------------- tiers

/**
 * The colour slot of each tier of a series, finest first as GET
 * /v1/series/{id} lists them: {name: index}. The names are the server's
 * (an operator may configure the pyramid), so colours go by position.
 */
export function tierSlots(tiers) {
  const out = {};
  (tiers ?? []).forEach((t, i) => {
    if (!(t.name in out)) out[t.name] = i;
  });
  return out;
}

/**
 * Turns an error answer into something to show: {title, status, type,
 * detail, errors: [{param, message}], retryAfter}. body is the parsed
 * problem+json, or null when the answer was not one; retryAfter the
 * Retry-After header (seconds), if any.
 */
export function describeProblem(status, statusText, body, retryAfter = null) {
  const wait = parseRetryAfter(retryAfter);
  if (body && typeof body === "object" && (body.title || body.detail)) {
    return {
      title: String(body.title || statusText || "Error"),
      status: Number(body.status) || status,
      type: String(body.type || ""),
      detail: String(body.detail || ""),
      errors: Array.isArray(body.errors)
        ? body.errors.map((e) => ({ param: String(e?.param ?? ""), message: String(e?.message ?? "") }))
        : [],
      retryAfter: wait,
    };
  }
  return {
    title: statusText || "Error", status, type: "", retryAfter: wait,
    detail: `The gateway answered ${status} without a problem description.`, errors: [],
  };
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(v, now = Date.now()) {
  if (v === null || v === undefined || v === "") return null;
  if (/^\d+$/.test(String(v).trim())) return Number(v);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : null;
}

/**
 * What a problem means for the person at the dashboard: {title, detail,
 * hint}. The answers that are not about the request's parameters (auth,
 * overload, budget, store) are put in words that say what happened and
 * what to do; the others keep the gateway's title and detail.
 */
export function explainProblem(p) {
  const typed = (slug) => String(p.type || "").endsWith(slug);
  if (p.status === 401) {
    return { title: "Token needed", detail: "The gateway asks for a bearer token for this request.", hint: "Enter a token to sign in; it is kept for this browser tab only." };
  }
  if (p.status === 403) {
    if (typed("blocked") || /blocked/i.test(p.title)) return { title: p.title, detail: p.detail, hint: "" };
    return {
      title: "Role too low",
      detail: "The token is known, but its role does not allow this request: reading needs the read role, writing the write role, administration the admin role.",
      hint: "Use a token with a higher role (Sign out, then enter another token).",
    };
  }
  // The contract names the type by its ending (".../overloaded"); this
  // gateway's types are "/docs#problem/<name>".
  if (p.status === 503 && (typed("/overloaded") || typed("-overloaded"))) {
    const when = p.retryAfter === null ? "in a moment" : p.retryAfter <= 1 ? "in a second" : `in ${p.retryAfter} seconds`;
    return { title: "Gateway busy", detail: `The gateway is busy: it is serving as many requests as it can and turned this one away before reading anything. Retry ${when}.`, hint: "" };
  }
  if (p.status === 504 || typed("budget-exceeded")) {
    return {
      title: "Latency budget ran out",
      detail: "The read did not complete within its latency budget (slo), so the gateway answered without points.",
      hint: "Pick a shorter range or a coarser resolution, or retry when the store is less busy.",
    };
  }
  if (p.status === 503) {
    return { title: p.title || "Store unavailable", detail: p.detail || "The store did not answer.", hint: p.retryAfter ? `Retry in ${p.retryAfter} seconds.` : "Retry later." };
  }
  if (p.status === 404 && typed("series-not-found")) {
    return { title: "Unknown series", detail: "No series has this id. Pick one from the list, or write points to it with POST /v1/points.", hint: "" };
  }
  return { title: p.title, detail: p.detail, hint: "" };
}

/** Why an answer is partial, in words, for its partial_reason. */
export function partialWhy(reason) {
  if (reason === "slo") return "the latency budget ran out before the whole range was read";
  if (reason === "unavailable") return "the store failed for some partitions";
  return "the gateway cut the answer short";
}
