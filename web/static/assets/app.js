// The dashboard: the series list, the controls whose state lives in the URL
// hash, the chart of the selected series and what the gateway did to
// answer it.

import { ProblemError, getJSON, readPages, seriesPath } from "./api.js";
import { Chart } from "./chart.js";
import { layoutRows } from "./layout.js";
import {
  annotateTimes, columnsOf, endsAtNow, formatAgo, formatCount, formatDuration, formatHash, formatOffset, formatShort,
  formatTime, isResolution, localOffset, mergePages, parseHash, pointsQuery, rangeMs, uncovered,
} from "./lib.js";

const REFRESH_MS = 10_000;
const MAX_PAGES = 10; // pages followed for one chart
const PAGE_LIMIT = 50_000; // points per page
const SERIES_PAGE = 100;
const PLAN_ROWS = 200;

const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
};

let state = parseHash(location.hash).state;
let load = { ctrl: null, gen: 0 };
let planCtrl = null;
let lastAnswer = null;
let lastQuery = "";

const chart = new Chart($("chart"), { onResize: onChartResize });

// ---------------------------------------------------------------- state

function setState(patch, { push = false } = {}) {
  const next = { ...state, ...patch };
  const hash = formatHash(next);
  if (hash !== location.hash) history[push ? "pushState" : "replaceState"](null, "", hash);
  applyState(next);
}

// The parts of the state that change what is read.
const queryKey = (s) => [s.series, s.range, s.from, s.to, s.res, s.agg, s.band].join("\n");

function applyState(next) {
  const prev = state;
  state = next;
  renderControls();
  if (prev.series !== state.series) {
    markSelected();
    loadSeriesMeta();
  }
  if (queryKey(prev) !== queryKey(state)) loadPoints();
}

function onLocationChange() {
  const { state: next, invalid } = parseHash(location.hash);
  showInvalid(invalid);
  applyState(next);
}
window.addEventListener("popstate", onLocationChange);
window.addEventListener("hashchange", onLocationChange);

function showInvalid(invalid) {
  const n = $("notice");
  n.hidden = invalid.length === 0;
  n.textContent = invalid.length ? `The link had invalid values for ${invalid.join(", ")}; defaults are used instead.` : "";
}

// ---------------------------------------------------------------- controls

function renderControls() {
  for (const b of $("ranges").querySelectorAll("button")) {
    b.setAttribute("aria-pressed", String(b.dataset.range === state.range));
  }
  $("custom-range").hidden = state.range !== "custom";
  if (state.range === "custom") {
    const now = Date.now();
    $("from").value = toLocalInput(timeOf(state.from, now));
    $("to-now").checked = !state.to || state.to === "now";
    $("to").disabled = $("to-now").checked;
    $("to").value = toLocalInput(timeOf(state.to || "now", now));
  }
  $("res").value = state.res;
  $("res").classList.remove("invalid");
  $("agg").value = state.agg;
  $("agg").disabled = state.res === "raw";
  const bandable = state.res !== "raw" && ["avg", "min", "max"].includes(state.agg);
  $("band").checked = state.band && bandable;
  $("band").disabled = !bandable;
  const live = endsAtNow(state);
  $("refresh").disabled = !live;
  $("refresh").checked = state.refresh && live;
  $("refresh-label").title = live ? "Reload every 10 seconds" : "Only for ranges that end now";
  $("plan").open = state.plan;
  document.title = (state.series ? state.series + " · " : "") + "tsgate";
  $("series-title").textContent = state.series || "Series";
}

$("ranges").addEventListener("click", (e) => {
  const range = e.target.closest("button")?.dataset.range;
  if (!range) return;
  if (range === "custom") {
    // Start from the range shown now.
    const to = Date.now();
    const from = to - (rangeMs(state.range) || 3600_000);
    setState({ range: "custom", from: state.from || isoSeconds(from), to: state.to || "now" }, { push: true });
    return;
  }
  setState({ range, from: "", to: "" }, { push: true });
});

$("toolbar").addEventListener("submit", (e) => {
  e.preventDefault();
  const from = localInputTime($("from").value);
  const to = $("to-now").checked ? null : localInputTime($("to").value);
  if (from === null || (!$("to-now").checked && to === null)) return;
  setState({ range: "custom", from: isoSeconds(from), to: to === null ? "now" : isoSeconds(to) }, { push: true });
});
$("to-now").addEventListener("change", () => ($("to").disabled = $("to-now").checked));

$("res").addEventListener("change", () => {
  const v = $("res").value.trim() || "auto";
  if (!isResolution(v)) {
    $("res").classList.add("invalid");
    return;
  }
  setState({ res: v }, { push: true });
});
$("res").addEventListener("keydown", (e) => e.key === "Enter" && (e.preventDefault(), $("res").dispatchEvent(new Event("change"))));
$("agg").addEventListener("change", () => setState({ agg: $("agg").value }, { push: true }));
$("band").addEventListener("change", () => setState({ band: $("band").checked }));
$("refresh").addEventListener("change", () => setState({ refresh: $("refresh").checked }));
$("reload").addEventListener("click", () => loadPoints({ force: true }));

/** RFC 3339 in UTC to the second: 2026-01-15T14:37:22Z. */
function isoSeconds(t) {
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

function toLocalInput(t) {
  if (!Number.isFinite(t)) return "";
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function localInputTime(v) {
  const t = v ? new Date(v).getTime() : NaN; // a datetime-local value is local time
  return Number.isFinite(t) ? t : null;
}

/** The instant an API time names, with now for relative ones. */
function timeOf(s, now) {
  if (!s || s === "now") return now;
  const rel = /^now-(\d+)(ms|s|m|h|d|w)$/.exec(s);
  if (rel) return now - Number(rel[1]) * { ms: 1, s: 1e3, m: 6e4, h: 36e5, d: 864e5, w: 6048e5 }[rel[2]];
  if (/^\d+$/.test(s)) return Number(s);
  return Date.parse(s);
}

// ---------------------------------------------------------------- series list

const list = { prefix: "", cursor: "", ctrl: null, count: 0 };

async function loadSeries(append = false) {
  list.ctrl?.abort();
  const ctrl = (list.ctrl = new AbortController());
  const q = new URLSearchParams({ limit: String(SERIES_PAGE) });
  if (list.prefix) q.set("prefix", list.prefix);
  if (append && list.cursor) q.set("cursor", list.cursor);
  $("series-problem").hidden = true;
  try {
    const page = await getJSON("v1/series?" + q, ctrl.signal);
    const ul = $("series-list");
    if (!append) {
      ul.replaceChildren();
      list.count = 0;
    }
    const now = Date.now();
    for (const s of page.series) {
      const button = el("button", { type: "button", title: s.id },
        el("span", { class: "id", text: s.id }),
        el("span", { class: "span", text: `${formatShort(s.first, now)} → ${formatAgo(s.last, now)}` }));
      button.dataset.id = s.id;
      button.addEventListener("click", () => setState({ series: s.id }, { push: true }));
      ul.append(el("li", {}, button));
    }
    list.count += page.series.length;
    list.cursor = page.next_cursor || "";
    $("series-more").hidden = !list.cursor;
    $("series-count").textContent = list.count === 0
      ? (list.prefix ? `No series start with “${list.prefix}”.` : "No series yet: write points with POST /v1/points.")
      : `${formatCount(list.count)}${list.cursor ? "+" : ""} series`;
    markSelected();
    if (!state.series && page.series.length && !append && !list.prefix) {
      setState({ series: page.series[0].id });
    }
  } catch (err) {
    if (err.name === "AbortError") return;
    showProblem($("series-problem"), err);
  }
}

function markSelected() {
  for (const b of $("series-list").querySelectorAll("button")) {
    const on = b.dataset.id === state.series;
    b.classList.toggle("selected", on);
    if (on) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
}

let prefixTimer = 0;
$("prefix").addEventListener("input", () => {
  clearTimeout(prefixTimer);
  prefixTimer = setTimeout(() => {
    list.prefix = $("prefix").value.trim();
    list.cursor = "";
    loadSeries();
  }, 250);
});
$("series-more").addEventListener("click", () => loadSeries(true));

async function loadSeriesMeta() {
  loadLayout();
  const id = state.series;
  $("series-meta").textContent = "";
  if (!id) return;
  try {
    const info = await getJSON(seriesPath(id));
    if (id !== state.series) return;
    const now = Date.now();
    const kept = info.tiers.map((t) => `${t.name} ${t.retention_s ? formatDuration(t.retention_s * 1000) : "forever"}`).join(", ");
    $("series-meta").textContent =
      `first point ${formatShort(info.first, now)} · last point ${formatAgo(info.last, now)} · tiers keep ${kept}`;
  } catch {
    // The read of the points shows the problem.
  }
}

// ---------------------------------------------------------------- points

async function loadPoints({ quiet = false, force = false } = {}) {
  load.ctrl?.abort();
  const gen = ++load.gen;
  const ctrl = (load.ctrl = new AbortController());
  $("problem").hidden = true;
  if (!state.series) {
    chart.set(null, "Select a series");
    clearFacts();
    return;
  }
  const query = pointsQuery(state, chart.plotWidth);
  lastQuery = query.toString();
  if ($("plan").open) loadPlan(force);
  $("chart").classList.add("loading");
  const started = performance.now();
  try {
    const { pages, capped, stuck, url } = await readPages(state.series, query, {
      signal: ctrl.signal, maxPages: MAX_PAGES, pageLimit: PAGE_LIMIT,
      onPage: (n) => n > 1 && !quiet && ($("tz").textContent = `reading page ${n + 1}…`),
    });
    if (gen !== load.gen) return;
    const answer = mergePages(pages);
    answer.capped = capped;
    answer.stuck = stuck;
    answer.url = url;
    answer.roundTripMs = performance.now() - started;
    lastAnswer = answer;
    show(answer);
  } catch (err) {
    if (err.name === "AbortError" || gen !== load.gen) return;
    lastAnswer = null;
    showProblem($("problem"), err);
    chart.set(null, "No chart: the request failed");
    clearFacts();
  } finally {
    if (gen === load.gen) $("chart").classList.remove("loading");
  }
}

function show(a) {
  const { t, cols } = columnsOf(a);
  const aggregated = a.resolution_ms > 0;
  const lineName = aggregated ? state.agg : "v";
  const band = aggregated && state.band && cols.min && cols.max ? { min: cols.min, max: cols.max } : null;
  // The tooltip lists the chosen aggregate first.
  const columns = {};
  for (const name of [lineName, ...Object.keys(cols)]) if (cols[name]) columns[name] = cols[name];
  chart.set({
    from: a.from, to: a.to, t, line: { name: lineName, values: cols[lineName] ?? new Float64Array(t.length) },
    band, columns, resolutionMs: a.resolution_ms, segments: a.segments, covered: a.covered, partialReason: a.partial_reason,
  });
  renderLegend(a);
  renderFacts(a, t.length);
}

function renderLegend(a) {
  const legend = $("legend");
  legend.replaceChildren();
  const aggregated = a.resolution_ms > 0;
  legend.append(el("span", { class: "key" }, el("i", { class: "sw line" }), aggregated ? state.agg : "value"));
  if (aggregated && state.band && a.columns.includes("min")) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw band" }), "min–max"));
  }
  if (uncovered(a.from, a.to, a.covered).length) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw uncovered" }), "not covered"));
  }
  legend.append(el("span", { class: "sep" }));
  for (const seg of a.segments ?? []) {
    legend.append(el("span", { class: "key", title: `${formatTime(seg.from, localOffset)} → ${formatTime(seg.to, localOffset)}` },
      el("i", { class: "sw strip tier-" + seg.tier }), `${seg.tier} ${spanText(seg.from, seg.to)}`));
  }
  const off = localOffset(Date.now());
  $("tz").textContent = `Local time, ${formatOffset(off)}${off ? "; UTC on hover" : ""}`;
}

function spanText(from, to) {
  const now = Date.now();
  return `${formatShort(from, now)} – ${Math.abs(to - now) < 60_000 ? "now" : formatShort(to, now)}`;
}

function clearFacts() {
  $("facts").replaceChildren();
  $("messages").replaceChildren();
  $("legend").replaceChildren();
  $("request").textContent = "";
  $("request").removeAttribute("href");
}

function renderFacts(a, n) {
  const aggregated = a.resolution_ms > 0;
  const facts = $("facts");
  facts.replaceChildren();
  const fact = (label, value, cls = "") => facts.append(el("div", { class: "fact " + cls }, el("dt", { text: label }), el("dd", {}, value)));
  fact("Tier", el("span", {}, el("i", { class: "sw strip tier-" + a.tier }), a.tier));
  fact("Resolution", aggregated ? `${formatDuration(a.resolution_ms)} windows` : "raw points");
  fact(aggregated ? "Windows" : "Points", formatCount(n));
  fact("Pages", a.capped || a.stuck ? `${a.pages} (stopped)` : String(a.pages), a.capped || a.stuck ? "warn" : "");
  const missing = uncovered(a.from, a.to, a.covered);
  fact("Partial", a.partial ? `yes · ${a.partial_reason || "?"}` : "no", a.partial ? "warn" : "");
  fact("Covered", missing.length ? `${coveredPercent(a)}% of the range` : "whole range", missing.length ? "warn" : "");
  fact("Buckets", formatCount(a.stats.buckets));
  fact("Partitions", formatCount(a.stats.partitions));
  fact("Rows read", formatCount(a.stats.rows_read));
  fact("Cache hits", formatCount(a.stats.cache_hits));
  fact("Elapsed", `${a.stats.elapsed_ms.toFixed(1)} ms`, "");
  fact("Round trip", `${a.roundTripMs.toFixed(0)} ms`);

  const msgs = $("messages");
  msgs.replaceChildren();
  const msg = (cls, title, text) => msgs.append(el("div", { class: "message " + cls }, el("b", { text: title }), " ", text));
  if (a.partial) {
    const why = a.partial_reason === "slo"
      ? "the latency budget ran out before the whole range was read"
      : a.partial_reason === "unavailable" ? "the store failed for some partitions" : "the gateway cut the answer short";
    const [c0, c1] = a.covered;
    const covered = c1 > c0 ? `only ${spanText(c0, c1)} is covered` : "no part of the range is covered";
    msg("warn", "Partial answer:", `${why}; ${covered}. The hatched part of the chart has no points from this answer.`);
  }
  if (a.stuck) {
    msg("warn", "Stopped paging:", "the next page brought nothing new (the store failed at the same place again), so its cursor was not followed further. Refresh to retry.");
  } else if (a.capped) {
    msg("warn", "Incomplete chart:", `stopped after ${a.pages} pages (${formatCount(n)} points). Pick a coarser resolution or a shorter range to see the rest.`);
  } else if (a.pagesCutShort) {
    msg("info", "Paged:", `${a.pagesCutShort} of ${a.pages} pages were cut short by the latency budget; their cursors were followed, so the chart is complete.`);
  } else if (a.pages > 1) {
    msg("info", "Paged:", `the answer came in ${a.pages} pages; all were read.`);
  }
  for (const w of a.warnings ?? []) msg("warn", "Warning:", annotateTimes(w));
  $("request").textContent = "GET " + a.url.replaceAll("%2C", ",");
  $("request").href = a.url;
}

function coveredPercent(a) {
  const [c0, c1] = a.covered;
  const pct = Math.max(0, Math.min(100, ((c1 - c0) / (a.to - a.from)) * 100));
  return pct > 99 ? Math.floor(pct) : Math.round(pct);
}

// ---------------------------------------------------------------- plan

$("plan").addEventListener("toggle", () => {
  const open = $("plan").open;
  if (open !== state.plan) setState({ plan: open });
  if (open) loadPlan();
});

let planURL = "";

/** Loads the plan of the current query, unless it is loaded (or loading) already. */
async function loadPlan(force = false) {
  const body = $("plan-body");
  if (!state.series) {
    body.replaceChildren(el("p", { class: "muted", text: "Select a series." }));
    return;
  }
  const url = `${seriesPath(state.series)}/plan?${lastQuery || pointsQuery(state, chart.plotWidth)}`;
  if (url === planURL && !force) return;
  planURL = url;
  planCtrl?.abort();
  const ctrl = (planCtrl = new AbortController());
  body.classList.add("loading");
  try {
    const p = await getJSON(url, ctrl.signal);
    body.replaceChildren(renderPlan(p, url));
  } catch (err) {
    if (err.name === "AbortError") return;
    planURL = "";
    const box = el("div", { class: "problem" });
    showProblem(box, err);
    body.replaceChildren(box);
  } finally {
    if (ctrl === planCtrl) body.classList.remove("loading");
  }
}

function renderPlan(p, url) {
  const frag = document.createDocumentFragment();
  frag.append(el("p", { class: "reason" }, el("b", { text: "Why: " }), p.reason || "—"));
  const dl = el("dl", { class: "facts" });
  const fact = (label, value, cls = "") => dl.append(el("div", { class: "fact " + cls }, el("dt", { text: label }), el("dd", {}, value)));
  fact("Tier", el("span", {}, el("i", { class: "sw strip tier-" + p.tier }), p.tier));
  fact("Resolution", p.resolution_ms ? `${formatDuration(p.resolution_ms)} windows` : "raw points");
  if (p.read) fact("Reads", spanText(p.read[0], p.read[1]), "wide");
  fact("Buckets", formatCount(p.bucket_count ?? p.buckets?.length ?? 0));
  fact("Partitions", formatCount(p.partitions));
  frag.append(dl);
  if (p.segments?.length) {
    const ul = el("ul", { class: "segments" });
    for (const s of p.segments) {
      ul.append(el("li", {}, el("i", { class: "sw strip tier-" + s.tier }), `${s.tier}: ${formatTime(s.from, localOffset)} → ${formatTime(s.to, localOffset)}`));
    }
    frag.append(el("h3", { text: "Segments" }), ul);
  }
  for (const w of p.warnings ?? []) frag.append(el("div", { class: "message warn" }, el("b", { text: "Warning:" }), " ", annotateTimes(w)));
  if (p.buckets?.length) {
    const table = el("table", { class: "buckets" });
    table.append(el("thead", {}, el("tr", {}, ...["Bucket start", "End", "Length", "Tier", "Partitions"].map((h) => el("th", { text: h })))));
    const tbody = el("tbody");
    for (const b of p.buckets.slice(0, PLAN_ROWS)) {
      tbody.append(el("tr", {},
        el("td", { text: formatTime(b.start, localOffset) }), el("td", { text: formatTime(b.end, localOffset) }),
        el("td", { text: formatDuration(b.end - b.start) }), el("td", { text: b.tier ?? "" }),
        el("td", { class: "num", text: formatCount(b.partitions) })));
    }
    table.append(tbody);
    frag.append(el("h3", { text: "Buckets" }), el("div", { class: "table-wrap" }, table));
    const shown = Math.min(PLAN_ROWS, p.buckets.length);
    const total = p.bucket_count ?? p.buckets.length;
    if (shown < total) frag.append(el("p", { class: "muted", text: `${formatCount(shown)} of ${formatCount(total)} buckets listed.` }));
  }
  frag.append(el("p", { class: "request" }, el("span", { class: "muted", text: "Request " }), el("a", { href: url, target: "_blank", rel: "noopener", text: "GET " + url.replaceAll("%2C", ",") })));
  return frag;
}

// ---------------------------------------------------------------- layout

/** Shows the series' raw layout history (GET /v1/series/{id}/layout) as a table. */
async function loadLayout() {
  const body = $("layout-body");
  const id = state.series;
  if (!id) {
    body.replaceChildren(el("p", { class: "muted", text: "Select a series." }));
    return;
  }
  try {
    const l = await getJSON(`${seriesPath(id)}/layout`);
    if (id !== state.series) return;
    const table = el("table", { class: "buckets" });
    table.append(el("thead", {}, el("tr", {}, ...["From", "Until", "Bucket", "Event buckets", ""].map((h) => el("th", { text: h })))));
    const tbody = el("tbody");
    for (const r of layoutRows(l.layouts, Date.now())) {
      tbody.append(el("tr", {},
        el("td", { text: r.since === null ? "the first point" : formatTime(r.since, localOffset) }),
        el("td", { text: r.until === null ? "—" : formatTime(r.until, localOffset) }),
        el("td", { text: r.bucket }), el("td", { class: "num", text: String(r.eventBuckets) }),
        el("td", { class: "muted", text: { now: "in force", pending: "pending", past: "" }[r.state] })));
    }
    table.append(tbody);
    body.replaceChildren(el("div", { class: "table-wrap" }, table));
  } catch (err) {
    if (id !== state.series) return;
    const box = el("div", { class: "problem" });
    showProblem(box, err);
    body.replaceChildren(box);
  }
}

// ---------------------------------------------------------------- errors

function showProblem(box, err) {
  const p = err instanceof ProblemError ? err.problem : { title: "Error", status: 0, detail: String(err?.message || err), errors: [] };
  box.replaceChildren();
  box.append(el("div", { class: "problem-title" }, el("b", { text: p.title }), p.status ? el("span", { class: "status", text: String(p.status) }) : ""));
  // A detail that only repeats a listed parameter error is left out.
  const repeats = p.errors.some((e) => p.detail === `${e.param}: ${e.message}`);
  if (p.detail && !repeats) box.append(el("p", { text: p.detail }));
  if (p.errors.length) {
    const ul = el("ul");
    for (const e of p.errors) ul.append(el("li", {}, el("code", { text: e.param }), " ", e.message));
    box.append(ul);
  }
  box.hidden = false;
}

// ---------------------------------------------------------------- refresh and resize

setInterval(() => {
  if (state.refresh && endsAtNow(state) && !document.hidden && !$("chart").classList.contains("loading")) {
    loadPoints({ quiet: true });
  }
}, REFRESH_MS);

let resizeTimer = 0;
function onChartResize(width) {
  // max_points follows the plot's width: reload once resizing settles.
  if (!lastAnswer || state.res !== "auto") return;
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    const q = new URLSearchParams(lastQuery);
    if (q.get("max_points") !== String(width)) loadPoints();
  }, 300);
}

// ---------------------------------------------------------------- start

showInvalid(parseHash(location.hash).invalid);
renderControls();
chart.set(null, state.series ? "" : "Select a series");
loadSeries();
if (state.series) {
  markSelected();
  loadSeriesMeta();
  loadPoints();
}
