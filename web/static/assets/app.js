// The dashboard: the series list, the selector field and its grouping, the
// controls whose state lives in the URL hash, the chart of the selected
// series, those overlaid on it and those the selector matches (or their
// groups), and what the gateway did to answer.

import { ProblemError, getJSON, onUnauthorized, readPages, seriesPath, setToken, token } from "./api.js";
import { Chart, SERIES_COLORS, seriesSlot } from "./chart.js";
import { attachCompletion } from "./completion.js";
import { layoutRows } from "./layout.js";
import {
  BANDS, MAX_SELECTOR, annotateTimes, bandLabel, bandable, columnsOf, csvName, endsAtNow, explainProblem, formatAgo, formatCount, formatDuration,
  formatHash, formatOffset, formatShort, formatTime, groupingText, labelsText, legendText, lineSlots, localOffset,
  matchQuery, mergeMatchPages, mergePages, parseDuration, parseHash, partialWhy, pointsQuery, rangeMs, rangeParams,
  readableURL, resolutionError, seriesOf, tierSlots, timeOf, toCSV, uncovered,
} from "./lib.js";
import { suggestionSource } from "./selector.js";

const MAX_PAGES = 10; // pages followed for one chart
const PAGE_LIMIT = 50_000; // points per page
const SERIES_PAGE = 100;
const PLAN_ROWS = 200;
const LEGEND_MAX = 100; // legend entries; a selector may match many more series

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
let lastAnswers = null; // {answers: Map id → merged answer, match: merged read by selector or null, view: {from, to}}
let lastQuery = "";
let lastMatchQuery = "";
let lastWidth = 0;
let zoomOrigin = null; // the range before zooming, for the reset
const tiersOf = new Map(); // series id → its tiers, from GET /v1/series/{id}
let pyramid = null; // the tiers of the first series read, for the lines of groups

function rememberTiers(id, tiers) {
  tiersOf.set(id, tiers);
  pyramid ??= tiers;
}

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
const queryKey = (s) => [seriesOf(s).join(","), s.match, String(s.groupBy), s.range, s.from, s.to, s.res, s.agg, s.band, s.bandOf].join("\n");

function applyState(next) {
  const prev = state;
  state = next;
  renderControls();
  if (prev.match !== state.match) {
    $("match").value = state.match;
    if ($("group-by").open) loadGroupLabels();
  }
  if (seriesOf(prev).join() !== seriesOf(state).join() || prev.match !== state.match) {
    markSelected();
    loadSeriesMeta();
  }
  if (queryKey(prev) !== queryKey(state)) loadPoints();
  else if ((String(prev.hidden) !== String(state.hidden) || String(prev.hiddenGroups) !== String(state.hiddenGroups)) && lastAnswers) show(lastAnswers);
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
  const canBand = state.res !== "raw" && bandable(state.agg);
  $("band").value = state.band && canBand ? state.bandOf : "off";
  $("band").disabled = !canBand;
  const live = endsAtNow(state);
  $("refresh").disabled = !live;
  $("refresh").value = live && state.refresh ? state.refresh : "off";
  $("refresh-label").title = live ? "Read the range again at this interval" : "Only for ranges that end now";
  $("plan").open = state.plan;
  const ids = seriesOf(state);
  const selector = [state.match, groupingText(state.groupBy)].filter(Boolean).join(" ");
  document.title = [...ids, selector].filter(Boolean).join(", ") + (ids.length || selector ? " · " : "") + "tsgate";
  const picked = state.series ? (ids.length > 1 ? `${state.series} + ${ids.length - 1}` : state.series) : "";
  $("series-title").textContent = [picked, selector].filter(Boolean).join(" + ") || "Series";
  renderGrouping();
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
$("band").addEventListener("change", () => {
  const v = $("band").value;
  setState(v === "off" ? { band: false } : { band: true, bandOf: v });
});
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

// ---------------------------------------------------------------- selector

// A selector shows the series it matches instead of the picked ones; the +
// of the list adds series besides them. An empty one goes back to the
// picked series.
$("selector-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("match").value.trim();
  if (v.length > MAX_SELECTOR) {
    showMatchError(new ProblemError({ title: "Selector too long", status: 0, type: "", retryAfter: null, errors: [],
      detail: `A selector may have at most ${formatCount(MAX_SELECTOR)} characters.` }));
    return;
  }
  if (v === state.match) return loadPoints({ force: true });
  const ids = seriesOf(state);
  setState(v
    ? { match: v, series: "", overlay: [], hidden: [], hiddenGroups: [] }
    : { match: "", groupBy: null, hidden: state.hidden.filter((id) => ids.includes(id)), hiddenGroups: [] }, { push: true });
});

// Suggestions by URL, read once while the field has the focus.
const suggestions = new Map();

function loadSuggestions(ctx) {
  const src = suggestionSource(ctx);
  if (!src) return Promise.resolve([]);
  if (!suggestions.has(src.url)) {
    const p = getJSON(src.url).then((b) => b[src.field] ?? []);
    p.catch(() => suggestions.delete(src.url));
    suggestions.set(src.url, p);
  }
  return suggestions.get(src.url).then((list) =>
    [...list, ...src.add.filter((n) => !list.includes(n))].filter((x) => !src.exclude.includes(x)));
}
attachCompletion($("match"), $("match-options"), loadSuggestions);
$("match").addEventListener("focus", () => suggestions.clear());

/** Shows a failed read by selector next to the field, marking the control its parameter names. */
function showMatchError(err) {
  const box = $("match-error");
  const params = err ? problemOf(err).errors.map((e) => e.param) : [];
  $("match").setAttribute("aria-invalid", String(params.includes("match")));
  $("group-by").querySelector("summary").setAttribute("aria-invalid", String(params.includes("group_by")));
  if (err) showProblem(box, err);
  else {
    box.hidden = true;
    box.replaceChildren();
  }
}

// The group-by menu: one line per series, one of all, or one per group of
// the chosen labels' values.
function renderGrouping() {
  const g = $("group-by");
  const by = state.groupBy;
  g.classList.toggle("disabled", !state.match);
  g.querySelector("summary").setAttribute("aria-disabled", String(!state.match));
  if (!state.match) g.open = false;
  $("group-by-text").textContent = by === null ? "none" : by.length ? by.join(", ") : "all series";
  const mode = by === null ? "none" : by.length ? "" : "all";
  for (const r of g.querySelectorAll('input[name="grouping"]')) r.checked = r.value === mode;
  for (const c of $("group-by-labels").querySelectorAll("input")) c.checked = !!by?.includes(c.value);
}

let groupLabelsOf = null; // the selector whose label names the menu lists

/** Lists the label names of the selector's series in the group-by menu. */
async function loadGroupLabels() {
  const sel = state.match;
  if (!sel || groupLabelsOf === sel) return;
  groupLabelsOf = sel;
  const box = $("group-by-labels");
  box.replaceChildren(el("span", { class: "muted", text: "Reading label names…" }));
  let names;
  try {
    names = (await getJSON("v1/labels?match=" + encodeURIComponent(sel))).labels;
  } catch (err) {
    if (sel !== state.match) return;
    groupLabelsOf = null;
    box.replaceChildren(el("span", { class: "muted", text: `No label names: ${problemOf(err).detail || problemOf(err).title}` }));
    return;
  }
  if (sel !== state.match) return;
  const all = [...new Set([...names, ...(state.groupBy ?? [])])];
  box.replaceChildren(...all.map((n) => el("label", { class: "check" }, el("input", { type: "checkbox", value: n }), el("code", { text: n }))));
  if (!all.length) box.replaceChildren(el("span", { class: "muted", text: "The series have no labels." }));
  renderGrouping();
}

const groupBy = $("group-by");
groupBy.addEventListener("toggle", () => groupBy.open && loadGroupLabels());
groupBy.querySelector("summary").addEventListener("click", (e) => !state.match && e.preventDefault());
groupBy.addEventListener("change", (e) => {
  let by;
  if (e.target.name === "grouping") by = e.target.value === "all" ? [] : null;
  else {
    const names = [...$("group-by-labels").querySelectorAll("input:checked")].map((c) => c.value);
    by = names.length ? names : null;
  }
  setState({ groupBy: by, hiddenGroups: [] }, { push: true });
});
groupBy.addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || !groupBy.open) return;
  groupBy.open = false;
  groupBy.querySelector("summary").focus();
});
document.addEventListener("click", (e) => groupBy.open && !groupBy.contains(e.target) && (groupBy.open = false));

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
      const labels = s.labels && Object.keys(s.labels).length ? ` ${labelsText(s.labels)}` : "";
      const button = el("button", { type: "button", title: `${s.id}${labels} (ctrl+click: overlay it on the chart)` },
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
    if (!state.series && !state.match && page.series.length && !append && !list.prefix) {
      setState({ series: page.series[0].id });
    }
  } catch (err) {
    if (err.name === "AbortError") return;
    showProblem($("series-problem"), err);
  }
}

function selectSeries(id) {
  setState({ series: id, overlay: [], hidden: [], match: "", groupBy: null, hiddenGroups: [] }, { push: true });
}

/** Adds id to the chart (besides a selector's series), or takes it off when it is on it already. */
function toggleOverlay(id) {
  const ids = seriesOf(state);
  if (!ids.length && !state.match) return selectSeries(id);
  if (ids.includes(id)) {
    const rest = ids.filter((x) => x !== id);
    if (!rest.length && !state.match) return;
    setState({ series: rest[0] ?? "", overlay: rest.slice(1), hidden: state.hidden.filter((x) => x !== id) }, { push: true });
    return;
  }
  setState(ids.length ? { overlay: [...ids.slice(1), id], series: ids[0] } : { series: id }, { push: true });
}

/** Hides a line of the chart, or shows it again: a series by its id, a group by its labels. */
function toggleHidden(line) {
  const key = line.group ? "hiddenGroups" : "hidden";
  const list = state[key];
  setState({ [key]: list.includes(line.key) ? list.filter((x) => x !== line.key) : [...list, line.key] }, { push: true });
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
  loadLayout();
  const id = state.series;
  $("series-meta").textContent = "";
  for (const other of seriesOf(state).slice(1)) {
    if (!tiersOf.has(other)) {
      getJSON(seriesPath(other)).then((info) => {
        rememberTiers(other, info.tiers);
        if (lastAnswers) show(lastAnswers);
      }, () => {});
    }
  }
  if (!id) return;
  try {
    const info = await getJSON(seriesPath(id));
    rememberTiers(id, info.tiers);
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
  if (!ids.length && !state.match) {
    chart.set(null, "Select a series or type a selector");
    lastAnswers = null;
    showMatchError(null);
    clearFacts();
    return;
  }
  const now = Date.now();
  lastWidth = chart.plotWidth;
  const query = pointsQuery(state, lastWidth, now);
  const range = rangeParams(state);
  const view = { from: timeOf(range.from, now), to: timeOf(range.to, now) };
  lastQuery = query.toString();
  // A read by selector answers without from and to: the ones it asked for.
  const mq = state.match ? matchQuery(state, lastWidth, now) : null;
  lastMatchQuery = mq ? mq.toString() : "";
  const span = mq && { from: timeOf(mq.get("from"), now), to: timeOf(mq.get("to"), now) };
  if ($("plan").open) loadPlan(force);
  $("chart").classList.add("loading");
  const started = performance.now();
  const opts = {
    signal: ctrl.signal, maxPages: MAX_PAGES, pageLimit: PAGE_LIMIT,
    onPage: (n) => n > 1 && !quiet && ($("tz").textContent = `reading page ${n + 1}…`),
  };
  const reads = ids.map((id) => readPages(`${seriesPath(id)}/points`, query, opts));
  if (mq) reads.push(readPages("v1/points", mq, opts));
  const results = await Promise.allSettled(reads);
  if (gen !== load.gen) return;
  $("chart").classList.remove("loading");
  // Counts finished reads, for whoever waits for the page to settle (the browser tests).
  document.documentElement.dataset.loads = String(Number(document.documentElement.dataset.loads || 0) + 1);
  const roundTripMs = performance.now() - started;
  const answers = new Map();
  const failures = [];
  let match = null;
  let matchFailure = null;
  results.forEach((r, i) => {
    if (r.status === "rejected") {
      if (r.reason?.name === "AbortError") return;
      if (i < ids.length) failures.push([ids[i], r.reason]);
      else matchFailure = r.reason;
      return;
    }
    const { pages, capped, stuck, url } = r.value;
    const extra = { capped, stuck, url, roundTripMs };
    if (i < ids.length) {
      answers.set(ids[i], Object.assign(mergePages(pages), extra));
      return;
    }
    match = Object.assign(mergeMatchPages(pages, span), extra);
    for (const res of match.results) Object.assign(res, extra, { matched: match.matched });
  });
  showMatchError(matchFailure);
  if (failures.length) showProblems(failures, ids.length > 1);
  if (!answers.size && !match) {
    lastAnswers = null;
    chart.set(null, failures.length || matchFailure ? "No chart: the request failed" : "");
    clearFacts();
    return;
  }
  // An explicit resolution asks for the range as it is: show what came.
  const first = answers.values().next().value ?? match;
  if (!(view.to > view.from) || state.res !== "auto") Object.assign(view, { from: first.from, to: first.to });
  lastAnswers = { answers, match, view };
  show(lastAnswers);
  if (match && !pyramid) loadPyramid(match);
}

let pyramidRead = null;

/** Reads the tiers of one series the selector matches, for the colours of the tiers of its lines. */
function loadPyramid(match) {
  const sel = state.match;
  pyramidRead ??= (async () => {
    let id = match.results.find((r) => !r.group)?.series;
    id ??= (await getJSON(`v1/series?limit=1&match=${encodeURIComponent(sel)}`)).series[0]?.id;
    if (!id) return;
    rememberTiers(id, (await getJSON(seriesPath(id))).tiers);
    if (lastAnswers) show(lastAnswers);
    if ($("plan").open) loadPlan(true); // its tier colours
  })().catch(() => {}).finally(() => (pyramidRead = null));
}

/** The chart data of one answer. */
function seriesData(id, a, slot) {
  const { t, cols } = columnsOf(a);
  const aggregated = a.resolution_ms > 0;
  const lineName = aggregated ? state.agg : "v";
  const [lo, hi] = BANDS[state.bandOf] ?? BANDS.minmax;
  const band = aggregated && state.band && cols[lo] && cols[hi] ? { min: cols[lo], max: cols[hi] } : null;
  // The tooltip lists the chosen aggregate first.
  const columns = {};
  for (const name of [lineName, ...Object.keys(cols)]) if (cols[name]) columns[name] = cols[name];
  return {
    id, slot, t, line: { name: lineName, values: cols[lineName] ?? new Float64Array(t.length) }, band, columns,
    resolutionMs: a.resolution_ms, segments: a.segments, covered: a.covered, from: a.from, to: a.to, partialReason: a.partial_reason,
  };
}

/**
 * The lines of the chart, in order: the picked series (colours by
 * position), then the selector's series or groups (colours by key, on the
 * slots left): {key, name, title, group, seriesCount, slot, answer (null
 * when the read failed), tiers}.
 */
function chartLines({ answers, match }) {
  const lines = seriesOf(state).map((id, i) => ({
    key: id, name: id, title: id, group: false, seriesCount: 1, slot: seriesSlot(i), answer: answers.get(id) ?? null, tiers: tiersOf.get(id),
  }));
  if (match) {
    const slots = lineSlots(match.results.map((r) => r.key), lines.map((l) => l.slot), SERIES_COLORS);
    match.results.forEach((r, i) => lines.push({
      key: r.key, name: r.name, group: !!r.group, seriesCount: r.seriesCount, slot: slots[i], answer: r,
      title: r.group ? `${r.name}, a group of ${formatCount(r.seriesCount)} series` : r.name === r.series ? r.series : `${r.series} ${r.name}`,
      tiers: r.group ? undefined : tiersOf.get(r.series),
    }));
  }
  return lines;
}

const isHidden = (line) => (line.group ? state.hiddenGroups : state.hidden).includes(line.key);

function show(last) {
  const lines = chartLines(last);
  const visible = lines.filter((l) => l.answer && !isHidden(l));
  const primary = visible[0] ?? lines.find((l) => l.answer);
  const { view, match } = last;
  if (!state.series && match) {
    $("series-meta").textContent = [`${formatCount(match.matched)} series match`, groupingText(state.groupBy)].filter(Boolean).join(" · ");
  }
  if (!primary) {
    chart.set(null, `No series match ${state.match}`);
    renderLegend(lines, []);
    renderFacts({ name: state.match, group: false, answer: { ...match, points: [], tier: "", resolution_ms: 0 } }, false);
    $("export").disabled = true;
    return;
  }
  const series = visible.map((l) => seriesData(l.name, l.answer, l.slot));
  chart.set({ from: view.from, to: view.to, series, tierSlots: tierSlots(primary.tiers ?? pyramid) });
  renderLegend(lines, visible);
  renderFacts(primary, lines.length > 1);
  $("export").disabled = !visible.length;
}

function exportCSV() {
  if (!lastAnswers) return;
  const lines = chartLines(lastAnswers).filter((l) => l.answer && !isHidden(l));
  if (!lines.length) return;
  // A group's lines go by the group's labels.
  const answers = lines.map((l) => (l.group ? { ...l.answer, series: l.name } : l.answer));
  const blob = new Blob([toCSV(answers)], { type: "text/csv" });
  const a = el("a", { href: URL.createObjectURL(blob), download: csvName(answers.map((x) => x.series), answers[0].from, answers[0].to) });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

function tierSwatch(tier, slots) {
  const slot = slots[tier];
  return el("i", { class: "sw strip " + (slot === undefined ? "tier-unknown" : "tier-" + (slot % 6)) });
}

function renderLegend(lines, visible) {
  const legend = $("legend");
  legend.replaceChildren();
  for (const line of lines.slice(0, LEGEND_MAX)) {
    const a = line.answer;
    const off = isHidden(line);
    const text = legendText({ ...line, aggregated: a?.resolution_ms > 0 }, { single: lines.length === 1, agg: state.agg });
    const b = el("button", {
      type: "button", class: "key series-key" + (off ? " off" : "") + (a ? "" : " failed"), "aria-pressed": String(!off),
      title: a ? `${off ? "Show" : "Hide"} ${line.title}` : `${line.title}: the read failed`,
    }, el("i", { class: `sw line series-${line.slot}` }), el("span", { class: "name", text }));
    b.dataset[line.group ? "group" : "id"] = line.key;
    b.addEventListener("click", () => toggleHidden(line));
    legend.append(b);
  }
  if (lines.length > LEGEND_MAX) legend.append(el("span", { class: "key more", text: `and ${formatCount(lines.length - LEGEND_MAX)} more` }));
  const shown = visible.map((l) => l.answer);
  const [lo] = BANDS[state.bandOf] ?? BANDS.minmax;
  if (shown.some((a) => a.resolution_ms > 0) && state.band && shown.some((a) => a.columns.includes(lo))) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw band" }), bandLabel(state.bandOf)));
  }
  if (shown.some((a) => uncovered(a.from, a.to, a.covered).length)) {
    legend.append(el("span", { class: "key" }, el("i", { class: "sw uncovered" }), "not covered"));
  }
  const first = visible[0];
  if (first?.answer.segments?.length) {
    legend.append(el("span", { class: "sep" }));
    const slots = tierSlots(first.tiers ?? tiersOf.get(state.series) ?? pyramid);
    for (const seg of first.answer.segments) {
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

/** What the gateway did for the read of line (the first one shown); several: the chart has other lines. */
function renderFacts(line, several) {
  const a = line.answer;
  const n = a.points.length;
  const aggregated = a.resolution_ms > 0;
  const facts = $("facts");
  facts.replaceChildren();
  const fact = (label, value, cls = "") => facts.append(el("div", { class: "fact " + cls }, el("dt", { text: label }), el("dd", {}, value)));
  if (several) fact(line.group ? "Group" : "Series", line.name, "wide");
  if (a.matched !== undefined) fact("Matched", `${formatCount(a.matched)} series`);
  // A selector that matches nothing has no tier, windows nor points.
  if (a.tier) {
    fact("Tier", el("span", {}, tierSwatch(a.tier, tierSlots(line.tiers ?? pyramid)), a.tier));
    fact("Resolution", aggregated ? `${formatDuration(a.resolution_ms)} windows` : "raw points");
    fact(aggregated ? "Windows" : "Points", formatCount(n));
  }
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
  $("request").textContent = "GET " + readableURL(a.url);
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
  if (!state.series && !state.match) {
    body.replaceChildren(el("p", { class: "muted", text: "Select a series." }));
    return;
  }
  // The plan of the picked series, else of the read by selector.
  const url = state.series
    ? `${seriesPath(state.series)}/plan?${lastQuery || pointsQuery(state, chart.plotWidth)}`
    : `v1/plan?${lastMatchQuery || matchQuery(state, chart.plotWidth)}`;
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
  const slots = tierSlots(tiersOf.get(state.series) ?? pyramid);
  if (p.series !== undefined) fact("Series", formatCount(p.series));
  fact("Tier", el("span", {}, tierSwatch(p.tier, slots), p.tier));
  fact("Resolution", p.resolution_ms ? `${formatDuration(p.resolution_ms)} windows` : "raw points");
  if (p.read) fact("Reads", spanText(p.read[0], p.read[1]), "wide");
  if (p.bucket_count !== undefined || p.buckets) fact("Buckets", formatCount(p.bucket_count ?? p.buckets.length));
  fact("Partitions", formatCount(p.partitions));
  frag.append(dl);
  if (p.tiers?.length) {
    const ul = el("ul", { class: "segments" });
    for (const t of p.tiers) ul.append(el("li", {}, tierSwatch(t.tier, slots), `${t.tier}: ${formatCount(t.partitions)} partitions`));
    frag.append(el("h3", { text: "Tiers read" }), ul);
  }
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
  frag.append(el("p", { class: "request" }, el("span", { class: "muted", text: "Request " }), el("a", { href: url, target: "_blank", rel: "noopener", text: "GET " + readableURL(url) })));
  return frag;
}

// ---------------------------------------------------------------- layout

/** Shows the series' raw layout history (GET /v1/series/{id}/layout) as a table. */
async function loadLayout() {
  const body = $("layout-body");
  const id = state.series;
  if (!id) {
    body.replaceChildren(el("p", { class: "muted", text: state.match ? "Layouts are per series: pick one in the list." : "Select a series." }));
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
$("match").value = state.match;
chart.set(null, state.series || state.match ? "" : "Select a series or type a selector");
loadSeries();
scheduleRefresh();
if (state.series || state.match) {
  markSelected();
  loadSeriesMeta();
  loadPoints();
}
