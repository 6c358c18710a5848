// The dashboard: the series list, the controls whose state lives in the URL
// hash, the chart of the selected series and those overlaid on it, and what
// the gateway did to answer.

import { ProblemError, getJSON, onUnauthorized, readPages, seriesPath, setToken, token } from "./api.js";
import { Chart, seriesSlot } from "./chart.js";
import {
  annotateTimes, columnsOf, csvName, endsAtNow, explainProblem, formatAgo, formatCount, formatDuration, formatHash,
  formatOffset, formatShort, formatTime, localOffset, mergePages, parseDuration, parseHash, partialWhy, pointsQuery,
  rangeMs, rangeParams, resolutionError, seriesOf, tierSlots, timeOf, toCSV, uncovered, visibleSeries,
} from "./lib.js";

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
let lastAnswers = null; // {answers: Map id → merged answer, view: {from, to}}
let lastQuery = "";
let lastWidth = 0;
let zoomOrigin = null; // the range before zooming, for the reset
const tiersOf = new Map(); // series id → its tiers, from GET /v1/series/{id}

const chart = new Chart($("chart"), { onResize: onChartResize, onView: onChartView, onReset: resetZoom });

// ---------------------------------------------------------------- state

function setState(patch, { push = false } = {}) {
  const next = { ...state, ...patch };
  const hash = formatHash(next);
  if (hash !== location.hash) history[push ? "pushState" : "replaceState"](null, "", hash);
  applyState(next);
}

// The parts of the state that change what is read. Hiding a series in the
// legend reads nothing: every series of the chart is read, shown or not.
const queryKey = (s) => [seriesOf(s).join(","), s.range, s.from, s.to, s.res, s.agg, s.band].join("\n");

function applyState(next) {
  const prev = state;
  state = next;
  renderControls();
  if (seriesOf(prev).join() !== seriesOf(state).join()) {
    markSelected();
    loadSeriesMeta();
  }
  if (queryKey(prev) !== queryKey(state)) loadPoints();
  else if (String(prev.hidden) !== String(state.hidden) && lastAnswers) show(lastAnswers);
  if (prev.refresh !== state.refresh || endsAtNow(prev) !== endsAtNow(state)) scheduleRefresh();
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
  showResolutionError("");
  $("agg").value = state.agg;
  $("agg").disabled = state.res === "raw";
  const bandable = state.res !== "raw" && ["avg", "min", "max"].includes(state.agg);
  $("band").checked = state.band && bandable;
  $("band").disabled = !bandable;
  const live = endsAtNow(state);
  $("refresh").disabled = !live;
  $("refresh").value = live && state.refresh ? state.refresh : "off";
  $("refresh-label").title = live ? "Read the range again at this interval" : "Only for ranges that end now";
  $("plan").open = state.plan;
  const ids = seriesOf(state);
  document.title = (ids.length ? ids.join(", ") + " · " : "") + "tsgate";
  $("series-title").textContent = state.series ? (ids.length > 1 ? `${state.series} + ${ids.length - 1}` : state.series) : "Series";
  $("zoom-reset").hidden = !zoomOrigin;
  $("signout").hidden = !token();
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
  const why = resolutionError(v);
  if (why) {
    showResolutionError(why);
    return;
  }
  showResolutionError("");
  setState({ res: v }, { push: true });
});

function showResolutionError(why) {
  $("res").classList.toggle("invalid", !!why);
  $("res").setAttribute("aria-invalid", String(!!why));
  $("res-error").textContent = why;
  $("res-error").hidden = !why;
}
$("res").addEventListener("keydown", (e) => e.key === "Enter" && (e.preventDefault(), $("res").dispatchEvent(new Event("change"))));
$("agg").addEventListener("change", () => setState({ agg: $("agg").value }, { push: true }));
$("band").addEventListener("change", () => setState({ band: $("band").checked }));
$("refresh").addEventListener("change", () => setState({ refresh: $("refresh").value === "off" ? "" : $("refresh").value }));
$("reload").addEventListener("click", () => loadPoints({ force: true }));
$("export").addEventListener("click", exportCSV);
$("zoom-reset").addEventListener("click", resetZoom);
$("signout").addEventListener("click", () => {
  setToken("");
  renderControls();
});

/** RFC 3339 in UTC to the second: 2026-01-15T14:37:22Z. */
function isoSeconds(t) {
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** RFC 3339 in UTC to the millisecond, for zoomed ranges: 2026-01-15T14:37:22.123Z. */
function isoMillis(t) {
  return new Date(Math.round(t)).toISOString().replace(".000Z", "Z");
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

// ---------------------------------------------------------------- zoom

function onChartView({ from, to }) {
  zoomOrigin ??= { range: state.range, from: state.from, to: state.to };
  setState({ range: "custom", from: isoMillis(from), to: isoMillis(to), refresh: "" }, { push: true });
}

function resetZoom() {
  if (!zoomOrigin) return;
  const origin = zoomOrigin;
  zoomOrigin = null;
  setState(origin, { push: true });
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
      const button = el("button", { type: "button", title: `${s.id} (ctrl+click: overlay it on the chart)` },
        el("span", { class: "id", text: s.id }),
        el("span", { class: "span", text: `${formatShort(s.first, now)} → ${formatAgo(s.last, now)}` }));
      button.dataset.id = s.id;
      button.addEventListener("click", (e) => (e.ctrlKey || e.metaKey ? toggleOverlay(s.id) : selectSeries(s.id)));
      const add = el("button", { type: "button", class: "overlay-toggle", title: `Overlay ${s.id} on the chart`, "aria-label": `Overlay ${s.id}` }, "+");
      add.dataset.id = s.id;
      add.addEventListener("click", () => toggleOverlay(s.id));
      ul.append(el("li", {}, button, add));
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

function selectSeries(id) {
  setState({ series: id, overlay: [], hidden: [] }, { push: true });
}

/** Adds id to the chart, or takes it off when it is on it already. */
function toggleOverlay(id) {
  if (!state.series) return selectSeries(id);
  const ids = seriesOf(state);
  if (ids.includes(id)) {
    const rest = ids.filter((x) => x !== id);
    if (!rest.length) return;
    setState({ series: rest[0], overlay: rest.slice(1), hidden: state.hidden.filter((x) => x !== id) }, { push: true });
    return;
  }
  setState({ overlay: [...state.overlay, id] }, { push: true });
}

function toggleHidden(id) {
  const hidden = state.hidden.includes(id) ? state.hidden.filter((x) => x !== id) : [...state.hidden, id];
  setState({ hidden }, { push: true });
}

function markSelected() {
  const ids = seriesOf(state);
  for (const b of $("series-list").querySelectorAll("li > button:first-child")) {
    const on = b.dataset.id === state.series;
    b.classList.toggle("selected", on);
    b.classList.toggle("overlaid", !on && ids.includes(b.dataset.id));
    if (on) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  for (const b of $("series-list").querySelectorAll(".overlay-toggle")) {
    const on = ids.includes(b.dataset.id);
    b.textContent = on ? "−" : "+";
    b.title = on ? `Take ${b.dataset.id} off the chart` : `Overlay ${b.dataset.id} on the chart`;
    b.setAttribute("aria-pressed", String(on));
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
  const id = state.series;
  $("series-meta").textContent = "";
  for (const other of seriesOf(state).slice(1)) {
    if (!tiersOf.has(other)) {
      getJSON(seriesPath(other)).then((info) => {
        tiersOf.set(other, info.tiers);
        if (lastAnswers) show(lastAnswers);
      }, () => {});
    }
  }
  if (!id) return;
  try {
    const info = await getJSON(seriesPath(id));
    tiersOf.set(id, info.tiers);
    if (lastAnswers) show(lastAnswers);
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
  const ids = seriesOf(state);
  if (!ids.length) {
    chart.set(null, "Select a series");
    lastAnswers = null;
    clearFacts();
    return;
  }
  const now = Date.now();
  lastWidth = chart.plotWidth;
  const query = pointsQuery(state, lastWidth, now);
  const range = rangeParams(state);
  const view = { from: timeOf(range.from, now), to: timeOf(range.to, now) };
  lastQuery = query.toString();
  if ($("plan").open) loadPlan(force);
  $("chart").classList.add("loading");
  const started = performance.now();
  const results = await Promise.allSettled(ids.map((id) => readPages(id, query, {
    signal: ctrl.signal, maxPages: MAX_PAGES, pageLimit: PAGE_LIMIT,
    onPage: (n) => n > 1 && !quiet && ($("tz").textContent = `reading page ${n + 1}…`),
  })));
  if (gen !== load.gen) return;
  $("chart").classList.remove("loading");
  // Counts finished reads, for whoever waits for the page to settle (the browser tests).
  document.documentElement.dataset.loads = String(Number(document.documentElement.dataset.loads || 0) + 1);
  const answers = new Map();
  const failures = [];
  results.forEach((r, i) => {
    if (r.status === "rejected") {
      if (r.reason?.name !== "AbortError") failures.push([ids[i], r.reason]);
      return;
    }
    const { pages, capped, stuck, url } = r.value;
    const answer = mergePages(pages);
    Object.assign(answer, { capped, stuck, url, roundTripMs: performance.now() - started });
    answers.set(ids[i], answer);
  });
  if (failures.length) showProblems(failures, ids.length > 1);
  if (!answers.size) {
    lastAnswers = null;
    chart.set(null, failures.length ? "No chart: the request failed" : "");
    clearFacts();
    return;
  }
  if (!(view.to > view.from)) {
    const first = answers.values().next().value;
    Object.assign(view, { from: first.from, to: first.to });
  }
  // An explicit resolution asks for the range as it is: show what came.
  if (state.res !== "auto") {
    const first = answers.values().next().value;
    Object.assign(view, { from: first.from, to: first.to });
  }
  lastAnswers = { answers, view };
  show(lastAnswers);
}

/** The chart data of one answer. */
function seriesData(id, a, slot) {
  const { t, cols } = columnsOf(a);
  const aggregated = a.resolution_ms > 0;
  const lineName = aggregated ? state.agg : "v";
  const band = aggregated && state.band && cols.min && cols.max ? { min: cols.min, max: cols.max } : null;
  // The tooltip lists the chosen aggregate first.
  const columns = {};
  for (const name of [lineName, ...Object.keys(cols)]) if (cols[name]) columns[name] = cols[name];
  return {
    id, slot, t, line: { name: lineName, values: cols[lineName] ?? new Float64Array(t.length) }, band, columns,
    resolutionMs: a.resolution_ms, segments: a.segments, covered: a.covered, from: a.from, to: a.to, partialReason: a.partial_reason,
  };
}

function show({ answers, view }) {
  const ids = seriesOf(state);
  const visible = visibleSeries(state).filter((id) => answers.has(id));
  const series = visible.map((id) => seriesData(id, answers.get(id), seriesSlot(ids.indexOf(id))));
  const primary = visible[0] ?? [...answers.keys()][0];
  chart.set({ from: view.from, to: view.to, series, tierSlots: tierSlots(tiersOf.get(primary) ?? tiersOf.get(state.series)) });
  renderLegend(answers, ids);
  const a = answers.get(primary);
  renderFacts(a, a.points.length, primary, answers.size > 1);
  $("export").disabled = !visible.length;
}

function exportCSV() {
  if (!lastAnswers) return;
  const visible = visibleSeries(state).filter((id) => lastAnswers.answers.has(id));
  if (!visible.length) return;
  const answers = visible.map((id) => lastAnswers.answers.get(id));
  const blob = new Blob([toCSV(answers)], { type: "text/csv" });
  const a = el("a", { href: URL.createObjectURL(blob), download: csvName(visible, answers[0].from, answers[0].to) });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

function tierSwatch(tier, slots) {
  const slot = slots[tier];
  return el("i", { class: "sw strip " + (slot === undefined ? "tier-unknown" : "tier-" + (slot % 6)) });
}

function renderLegend(answers, ids) {
  const legend = $("legend");
  legend.replaceChildren();
  const hidden = new Set(state.hidden);
  for (const id of ids) {
    const a = answers.get(id);
    const off = hidden.has(id);
    const b = el("button", {
      type: "button", class: "key series-key" + (off ? " off" : "") + (a ? "" : " failed"), "aria-pressed": String(!off),
      title: a ? (off ? `Show ${id}` : `Hide ${id}`) : `${id}: the read failed`,
    }, el("i", { class: `sw line series-${seriesSlot(ids.indexOf(id))}` }), ids.length > 1 ? id : a && a.resolution_ms > 0 ? `${id} · ${state.agg}` : id);
    b.dataset.id = id;
    b.addEventListener("click", () => toggleHidden(id));
    legend.append(b);
  }
  const shown = ids.filter((id) => !hidden.has(id) && answers.has(id)).map((id) => answers.get(id));
  if (shown.some((a) => a.resolution_ms > 0) && state.band && shown.some((a) => a.columns.includes("min"))) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw band" }), "min–max"));
  }
  if (shown.some((a) => uncovered(a.from, a.to, a.covered).length)) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw uncovered" }), "not covered"));
  }
  const first = shown[0];
  if (first?.segments?.length) {
    legend.append(el("span", { class: "sep" }));
    const slots = tierSlots(tiersOf.get(first.series) ?? tiersOf.get(state.series));
    for (const seg of first.segments) {
      legend.append(el("span", { class: "key segment", title: `${formatTime(seg.from, localOffset)} → ${formatTime(seg.to, localOffset)}` },
        tierSwatch(seg.tier, slots), `${seg.tier} ${spanText(seg.from, seg.to)}`));
    }
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

function renderFacts(a, n, id, several) {
  const aggregated = a.resolution_ms > 0;
  const facts = $("facts");
  facts.replaceChildren();
  const fact = (label, value, cls = "") => facts.append(el("div", { class: "fact " + cls }, el("dt", { text: label }), el("dd", {}, value)));
  if (several) fact("Series", id, "wide");
  fact("Tier", el("span", {}, tierSwatch(a.tier, tierSlots(tiersOf.get(id))), a.tier));
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
    const why = partialWhy(a.partial_reason);
    const [c0, c1] = a.covered;
    const covered = c1 > c0 ? `only ${spanText(c0, c1)} is covered` : "no part of the range is covered";
    msg("warn", "Partial answer:", `${why}; ${covered}. The hatched part of the chart has no points from this answer.`);
  }
  if (a.stuck) {
    const again = a.partial_reason === "slo" ? "the latency budget ran out at the same place again" : "the store failed at the same place again";
    msg("warn", "Stopped paging:", `the next page brought nothing new (${again}), so its cursor was not followed further. Refresh to retry.`);
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
  const slots = tierSlots(tiersOf.get(state.series));
  fact("Tier", el("span", {}, tierSwatch(p.tier, slots), p.tier));
  fact("Resolution", p.resolution_ms ? `${formatDuration(p.resolution_ms)} windows` : "raw points");
  if (p.read) fact("Reads", spanText(p.read[0], p.read[1]), "wide");
  fact("Buckets", formatCount(p.bucket_count ?? p.buckets?.length ?? 0));
  fact("Partitions", formatCount(p.partitions));
  frag.append(dl);
  if (p.segments?.length) {
    const ul = el("ul", { class: "segments" });
    for (const s of p.segments) {
      ul.append(el("li", {}, tierSwatch(s.tier, slots), `${s.tier}: ${formatTime(s.from, localOffset)} → ${formatTime(s.to, localOffset)}`));
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

// ---------------------------------------------------------------- errors

function problemOf(err) {
  return err instanceof ProblemError
    ? err.problem
    : { title: "Error", status: 0, type: "", detail: String(err?.message || err), errors: [], retryAfter: null };
}

/** Fills box with a problem, in words that say what happened and what to do. */
function renderProblem(box, err, prefix = "") {
  const p = problemOf(err);
  const x = explainProblem(p);
  box.append(el("div", { class: "problem-title" }, el("b", { text: prefix + x.title }), p.status ? el("span", { class: "status", text: String(p.status) }) : ""));
  // A detail that only repeats a listed parameter error is left out.
  const repeats = p.errors.some((e) => x.detail === `${e.param}: ${e.message}`);
  if (x.detail && !repeats) box.append(el("p", { text: x.detail }));
  if (p.errors.length) {
    const ul = el("ul");
    for (const e of p.errors) ul.append(el("li", {}, el("code", { text: e.param }), " ", e.message));
    box.append(ul);
  }
  if (x.hint) box.append(el("p", { class: "hint", text: x.hint }));
  if (p.status === 401) {
    const again = el("button", { type: "button", class: "button", text: "Enter a token" });
    again.addEventListener("click", async () => {
      const t = await askForToken(p);
      if (t) {
        setToken(t);
        renderControls();
        loadSeries();
        loadSeriesMeta();
        loadPoints();
      }
    });
    box.append(again);
  }
}

function showProblem(box, err) {
  box.replaceChildren();
  renderProblem(box, err);
  box.hidden = false;
}

/** Shows the failed reads of the chart; with several series, each names its series. */
function showProblems(failures, several) {
  const box = $("problem");
  box.replaceChildren();
  for (const [id, err] of failures) {
    const part = el("div", { class: "problem-part" });
    renderProblem(part, err, several ? `${id}: ` : "");
    box.append(part);
  }
  box.hidden = false;
}

// ---------------------------------------------------------------- token

/** Asks for a bearer token in the sign-in dialog: the token, or null when cancelled. */
function askForToken(problem) {
  const dialog = $("auth");
  const input = $("auth-token");
  $("auth-why").textContent = token()
    ? "The gateway did not accept the token of this tab. Enter another bearer token."
    : "The gateway asks for a bearer token. It is kept in this tab's session storage and sent with every API call.";
  $("auth-detail").textContent = problem?.detail || "";
  input.value = "";
  return new Promise((resolve) => {
    const done = (value) => {
      dialog.removeEventListener("close", onClose);
      $("auth-form").removeEventListener("submit", onSubmit);
      if (dialog.open) dialog.close();
      if (value) setToken(value);
      resolve(value);
      renderControls();
    };
    const onSubmit = (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (t) done(t);
    };
    const onClose = () => done(null);
    dialog.addEventListener("close", onClose);
    $("auth-form").addEventListener("submit", onSubmit);
    dialog.showModal();
    input.focus();
  });
}
onUnauthorized(askForToken);
$("auth-cancel").addEventListener("click", () => $("auth").close());

// ---------------------------------------------------------------- refresh and resize

let refreshTimer = 0;

/** Reads the range again after the chosen interval, for ranges that end now. */
function scheduleRefresh() {
  clearTimeout(refreshTimer);
  const every = parseDuration(state.refresh);
  if (!(every > 0) || !endsAtNow(state)) return;
  refreshTimer = setTimeout(() => {
    if (!document.hidden && !$("chart").classList.contains("loading") && !chart.drag) loadPoints({ quiet: true });
    scheduleRefresh();
  }, every);
}

let resizeTimer = 0;
function onChartResize(width) {
  // max_points follows the plot's width: reload once resizing settles.
  if (!lastAnswers || state.res !== "auto") return;
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (width !== lastWidth) loadPoints();
  }, 300);
}

// ---------------------------------------------------------------- start

showInvalid(parseHash(location.hash).invalid);
renderControls();
chart.set(null, state.series ? "" : "Select a series");
loadSeries();
scheduleRefresh();
if (state.series) {
  markSelected();
  loadSeriesMeta();
  loadPoints();
}
