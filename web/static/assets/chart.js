// The time-series chart, drawn by hand on two stacked canvases: the base
// one holds the grid, axes, the min–max bands, the lines of every visible
// series, the uncovered parts of the range and the strip of tier segments;
// the overlay holds the hover crosshair and the zoom selection, so moving
// the pointer never redraws the data.
//
// Exploring: drag to zoom into a span, double-click to go back, the wheel
// zooms around the pointer, shift+wheel (or a sideways wheel) and
// shift+drag pan. The chart redraws the data it has at once and reports
// the new range (onView) so that the page can read it at its resolution.

import {
  formatDuration, formatExact, formatTime, formatValue, linearScale, localOffset, nearestIndex, panRange, runs,
  selectionRange, timeTicks, uncovered, valueTicks, zoomRange,
} from "./lib.js";

const MARGIN = { left: 64, right: 18, top: 12 };
const STRIP = { gap: 5, height: 7 };
const X_LABELS = 36; // two lines of time labels under the strip
const BOTTOM = STRIP.gap + STRIP.height + X_LABELS;
/** Line colours: the CSS variables --series-0 … --series-9. */
export const SERIES_COLORS = 10;
const TIER_COLORS = 6; // --tier-0 … --tier-5
const WHEEL_SETTLE_MS = 250;
const STROKE_CHUNK = 64; // vertices per stroked piece of a line
const TOOLTIP_SERIES = 8; // series the tooltip lists values of

/** Horizontal space the plot leaves for axes: max_points is the rest of the width. */
export const PLOT_INSET = MARGIN.left + MARGIN.right;

/** The colour slot of the i-th series: the CSS variable --series-<slot>. */
export const seriesSlot = (i) => i % SERIES_COLORS;

/** First index of the ascending array ts whose element is ≥ t. */
function lowerBound(ts, t) {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A chart in container, which holds canvas.base, canvas.overlay and
 * div.tooltip. onResize(plotWidth) is called when the plot's width in CSS
 * pixels changes; onView({from, to}) when zooming or panning settles on a
 * new range; onReset() on a double-click.
 */
export class Chart {
  constructor(container, { onResize, onView, onReset } = {}) {
    this.el = container;
    this.base = container.querySelector("canvas.base");
    this.overlay = container.querySelector("canvas.overlay");
    this.tooltip = container.querySelector(".tooltip");
    this.onResize = onResize;
    this.onView = onView;
    this.onReset = onReset;
    this.data = null;
    this.view = null;
    this.message = "";
    this.layout = null;
    this.width = 0;
    this.height = 0;
    this.dpr = 1;
    this.pointer = null;
    this.drag = null;
    this.wheelTimer = 0;
    /** Time spent in draw(): the last one, how many, their total (ms). */
    this.frames = { last: 0, count: 0, total: 0 };
    new ResizeObserver(() => this.resize()).observe(container);
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => this.draw());
    const o = this.overlay;
    o.addEventListener("pointermove", (e) => this.move(e));
    o.addEventListener("pointerleave", () => !this.drag && this.hover(null));
    o.addEventListener("pointerdown", (e) => this.down(e));
    o.addEventListener("pointerup", (e) => this.up(e));
    o.addEventListener("pointercancel", () => this.cancelDrag());
    o.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    o.addEventListener("dblclick", (e) => {
      e.preventDefault();
      this.onReset?.();
    });
    this.resize();
  }

  /** The width of the plot area in CSS pixels. */
  get plotWidth() {
    return Math.max(10, Math.floor(this.el.clientWidth - PLOT_INSET));
  }

  /**
   * Shows answers: {from, to, series: [{id, slot, t, line: {name, values},
   * band: {min, max} or null, columns: {name: values}, resolutionMs,
   * segments, covered, from, to, partialReason}], tierSlots: {name: slot}}
   * where from and to are the range shown (the answers may reach before
   * it, to their whole first window). With data null, shows message in an
   * empty frame.
   */
  set(data, message = "") {
    if (data) for (const s of data.series) s.runs = runs(s.t, s.resolutionMs);
    this.data = data;
    // An answer that lands while the wheel or a pan is still moving the
    // view keeps the view where the hand is; the read of that range follows.
    const moving = this.wheelTimer || this.drag?.mode === "pan";
    this.view = data ? (moving && this.view ? this.view : { from: data.from, to: data.to }) : null;
    this.message = message;
    this.draw();
    this.hover(this.pointer);
  }

  /** Shows the range [from, to) of the data at hand, until the next set(). */
  setView(from, to) {
    if (!this.data || !(to > from)) return;
    this.view = { from, to };
    this.draw();
  }

  resize() {
    const w = this.el.clientWidth;
    const h = this.el.clientHeight;
    const dpr = window.devicePixelRatio || 1;
    if (w === this.width && h === this.height && dpr === this.dpr) return;
    const widthChanged = w !== this.width;
    Object.assign(this, { width: w, height: h, dpr });
    for (const c of [this.base, this.overlay]) {
      c.width = Math.max(1, Math.round(w * dpr));
      c.height = Math.max(1, Math.round(h * dpr));
      c.style.width = w + "px";
      c.style.height = h + "px";
    }
    this.draw();
    if (widthChanged && w > 0) this.onResize?.(this.plotWidth);
  }

  colors() {
    const s = getComputedStyle(this.el);
    const v = (name) => s.getPropertyValue(name).trim();
    return {
      font: s.fontFamily,
      text: v("--chart-text"), muted: v("--chart-muted"), grid: v("--chart-grid"), axis: v("--chart-axis"),
      uncovered: v("--chart-uncovered"), bg: v("--chart-bg"), select: v("--chart-select"),
      series: Array.from({ length: SERIES_COLORS }, (_, i) => v("--series-" + i)),
      tiers: Array.from({ length: TIER_COLORS }, (_, i) => v("--tier-" + i)),
    };
  }

  tierColor(c, tier) {
    const slot = this.data?.tierSlots?.[tier];
    return slot === undefined ? c.muted : c.tiers[slot % TIER_COLORS];
  }

  context(canvas) {
    const ctx = canvas.getContext("2d");
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.height);
    return ctx;
  }

  plotArea() {
    return { x0: MARGIN.left, x1: this.width - MARGIN.right, y0: MARGIN.top, y1: this.height - BOTTOM };
  }

  draw() {
    if (!this.width || !this.height) return;
    const started = performance.now();
    this.drawBase();
    const ms = performance.now() - started;
    this.frames.last = ms;
    this.frames.count++;
    this.frames.total += ms;
  }

  drawBase() {
    const ctx = this.context(this.base);
    const c = this.colors();
    const plot = this.plotArea();
    if (plot.x1 - plot.x0 < 20 || plot.y1 - plot.y0 < 20) return;
    ctx.font = `12px ${c.font}`;
    const d = this.data;
    if (!d) {
      this.layout = null;
      ctx.strokeStyle = c.axis;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(plot.x0, Math.round(plot.y1) + 0.5);
      ctx.lineTo(plot.x1, Math.round(plot.y1) + 0.5);
      ctx.stroke();
      this.centerText(ctx, c, plot, this.message);
      return;
    }
    const { from, to } = this.view;
    const xs = linearScale(from, to, plot.x0, plot.x1);
    // The value axis fits what is in view (and the points just outside,
    // whose lines enter it).
    let lo = Infinity;
    let hi = -Infinity;
    const spans = d.series.map((s) => [Math.max(0, lowerBound(s.t, from) - 1), Math.min(s.t.length, lowerBound(s.t, to) + 1)]);
    d.series.forEach((s, k) => {
      const [i0, i1] = spans[k];
      const extent = (a) => {
        for (let i = i0; i < i1; i++) {
          if (a[i] < lo) lo = a[i];
          if (a[i] > hi) hi = a[i];
        }
      };
      extent(s.line.values);
      if (s.band) {
        extent(s.band.min);
        extent(s.band.max);
      }
    });
    const vt = valueTicks(lo, hi, Math.max(2, Math.round((plot.y1 - plot.y0) / 56)));
    const ys = linearScale(vt.min, vt.max, plot.y1, plot.y0);
    const reach = Math.max(Math.abs(vt.min), Math.abs(vt.max));
    this.layout = { plot, xs, ys };

    // Grid and value axis.
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const v of vt.ticks) {
      const y = Math.round(ys(v)) + 0.5;
      ctx.strokeStyle = c.grid;
      ctx.beginPath();
      ctx.moveTo(plot.x0, y);
      ctx.lineTo(plot.x1, y);
      ctx.stroke();
      ctx.fillStyle = c.muted;
      ctx.fillText(formatValue(v, vt.step, reach), plot.x0 - 8, y);
    }

    // Time axis: ticks on round local times, the date or year under the
    // first one and wherever it changes.
    const tt = timeTicks(from, to, plot.x1 - plot.x0, { minSpacing: 96 });
    const labelY = plot.y1 + STRIP.gap + STRIP.height + 8;
    ctx.textBaseline = "top";
    let lastRight = -Infinity;
    for (const tick of tt.ticks) {
      const x = Math.round(xs(tick.t)) + 0.5;
      ctx.strokeStyle = c.grid;
      ctx.beginPath();
      ctx.moveTo(x, plot.y0);
      ctx.lineTo(x, plot.y1);
      ctx.stroke();
      const w = Math.max(ctx.measureText(tick.label).width, tick.context ? ctx.measureText(tick.context).width : 0);
      const cx = Math.min(Math.max(x, w / 2 + 2), this.width - w / 2 - 2);
      if (cx - w / 2 < lastRight + 8) continue; // never overlap a label
      lastRight = cx + w / 2;
      ctx.textAlign = "center";
      ctx.fillStyle = c.text;
      ctx.fillText(tick.label, cx, labelY);
      if (tick.context) {
        ctx.fillStyle = c.muted;
        ctx.fillText(tick.context, cx, labelY + 15);
      }
    }

    // The parts of the range an answer did not cover (partial answers);
    // the lines of one read by selector share theirs, drawn once, unnamed.
    ctx.save();
    const spanKey = (s) => uncovered(s.from, s.to, s.covered).join(";");
    const drawn = new Set();
    for (const s of d.series) {
      const key = spanKey(s);
      if (!key || drawn.has(key)) continue;
      drawn.add(key);
      const shared = d.series.some((o) => o !== s && spanKey(o) === key);
      for (const [a, b] of uncovered(s.from, s.to, s.covered)) {
        const x0 = Math.max(plot.x0, xs(a));
        const x1 = Math.min(plot.x1, xs(b));
        if (x1 <= x0) continue;
        ctx.fillStyle = this.hatch(ctx, c.uncovered);
        ctx.fillRect(x0, plot.y0, x1 - x0, plot.y1 - plot.y0);
        // The longest label that fits: who, why, or just what.
        const why = s.partialReason === "slo" ? "latency budget ran out" : s.partialReason === "unavailable" ? "store failed" : s.partialReason;
        const who = d.series.length > 1 && !shared ? `${s.id}: ` : "";
        const label = [why && `${who}not covered, ${why}`, `${who}not covered`, "not covered"]
          .find((l) => l && x1 - x0 > ctx.measureText(l).width + 12);
        if (label) {
          ctx.fillStyle = c.muted;
          ctx.textAlign = "left";
          ctx.fillText(label, x0 + 6, plot.y0 + 6 + 16 * (drawn.size - 1));
        }
      }
    }
    ctx.restore();

    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x0, plot.y0 - 2, plot.x1 - plot.x0, plot.y1 - plot.y0 + 4);
    ctx.clip();
    d.series.forEach((s, k) => {
      const color = c.series[s.slot % SERIES_COLORS];
      const parts = clipRuns(s.runs, spans[k]);
      if (s.band) this.drawBand(ctx, color, s, parts, xs, ys);
      this.drawLine(ctx, color, s, parts, xs, ys, plot, spans[k][1] - spans[k][0]);
    });
    ctx.restore();

    // Axis line and the strip of segments: which tier served which span
    // (of the first series shown; the legend lists every series' tiers).
    ctx.strokeStyle = c.axis;
    ctx.beginPath();
    ctx.moveTo(plot.x0, Math.round(plot.y1) + 0.5);
    ctx.lineTo(plot.x1, Math.round(plot.y1) + 0.5);
    ctx.stroke();
    const sy = plot.y1 + STRIP.gap;
    const first = d.series[0];
    for (const seg of first?.segments ?? []) {
      const a = Math.max(plot.x0, xs(seg.from));
      const b = Math.min(plot.x1, xs(seg.to));
      if (b <= a) continue;
      ctx.fillStyle = this.tierColor(c, seg.tier);
      ctx.fillRect(a, sy, Math.max(1, b - a - 1), STRIP.height);
      const w = ctx.measureText(seg.tier).width;
      if (b - a > w + 40 && first.segments.length > 1) {
        // Name the tier where there is room, at the segment's start.
        ctx.fillStyle = c.muted;
        ctx.textAlign = "left";
        ctx.textBaseline = "bottom";
        ctx.fillText(seg.tier, a + 3, plot.y1 - 2);
        ctx.textBaseline = "top";
      }
    }
    if (!d.series.some((s) => s.t.length)) this.centerText(ctx, c, plot, this.message || (d.series.length ? "No points in this range" : "Every series is hidden: click one in the legend"));
  }

  drawBand(ctx, color, d, parts, xs, ys) {
    ctx.fillStyle = color;
    ctx.globalAlpha = 0.18;
    for (const [s, e] of parts) {
      ctx.beginPath();
      if (e - s === 1) {
        const x = xs(d.t[s]);
        ctx.rect(x - 1.5, ys(d.band.max[s]), 3, Math.max(1, ys(d.band.min[s]) - ys(d.band.max[s])));
        ctx.fill();
        continue;
      }
      ctx.moveTo(xs(d.t[s]), ys(d.band.max[s]));
      for (let i = s + 1; i < e; i++) ctx.lineTo(xs(d.t[i]), ys(d.band.max[i]));
      for (let i = e - 1; i >= s; i--) ctx.lineTo(xs(d.t[i]), ys(d.band.min[i]));
      ctx.closePath();
      ctx.fill();
    }
    ctx.globalAlpha = 1;
  }

  drawLine(ctx, color, d, parts, xs, ys, plot, inView) {
    const v = d.line.values;
    const width = plot.x1 - plot.x0;
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineJoin = "round";
    ctx.lineCap = "round";
    const sparse = inView > 0 && width / inView >= 8;
    // Long paths are stroked in pieces: a rasterizer's cost for one wide
    // stroked path grows faster than its length (measured in Chromium: a
    // 3,600-vertex line 1.5 px wide took 45–150 ms as one path, 11–25 ms in
    // pieces of 64 vertices; docs/benchmarks.md).
    let n = 0;
    let lx = 0;
    let ly = 0;
    const to = (x, y) => {
      ctx.lineTo(x, y);
      lx = x;
      ly = y;
      if (++n >= STROKE_CHUNK) {
        ctx.stroke();
        ctx.beginPath();
        ctx.moveTo(lx, ly);
        n = 0;
      }
    };
    for (const [s, e] of parts) {
      if (e - s === 1) {
        ctx.beginPath();
        ctx.arc(xs(d.t[s]), ys(v[s]), 2.5, 0, 2 * Math.PI);
        ctx.fill();
        continue;
      }
      ctx.beginPath();
      n = 0;
      if (e - s > 2 * width) {
        // More points than pixels: per pixel column, its first, lowest,
        // highest and last value keep every peak at a fraction of the work.
        // One device pixel wide, which rasterizers draw fastest; at that
        // density the columns read as a band anyway.
        ctx.lineWidth = 1 / this.dpr;
        let col = NaN;
        let first = 0;
        let lo = 0;
        let hi = 0;
        let last = 0;
        let started = false;
        const flush = () => {
          if (Number.isNaN(col)) return;
          const x = col + 0.5;
          if (!started) ctx.moveTo(x, ys(first));
          else to(x, ys(first));
          started = true;
          to(x, ys(lo));
          to(x, ys(hi));
          to(x, ys(last));
        };
        for (let i = s; i < e; i++) {
          const x = Math.floor(xs(d.t[i]));
          if (x !== col) {
            flush();
            col = x;
            first = lo = hi = last = v[i];
          } else {
            if (v[i] < lo) lo = v[i];
            if (v[i] > hi) hi = v[i];
            last = v[i];
          }
        }
        flush();
      } else {
        ctx.lineWidth = 1.5;
        ctx.moveTo(xs(d.t[s]), ys(v[s]));
        for (let i = s + 1; i < e; i++) to(xs(d.t[i]), ys(v[i]));
      }
      ctx.stroke();
      if (sparse) {
        for (let i = s; i < e; i++) {
          ctx.beginPath();
          ctx.arc(xs(d.t[i]), ys(v[i]), 2.5, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    }
    ctx.lineCap = "butt";
  }

  // ------------------------------------------------------------ zoom and pan

  timeAt(x) {
    return this.layout ? this.layout.xs.invert(x) : NaN;
  }

  down(e) {
    if (e.button !== 0 || !this.layout || !this.data) return;
    const { plot } = this.layout;
    if (e.offsetX < plot.x0 || e.offsetX > plot.x1 || e.offsetY < plot.y0 || e.offsetY > plot.y1) return;
    this.overlay.setPointerCapture?.(e.pointerId);
    this.drag = { mode: e.shiftKey ? "pan" : "select", x: e.offsetX, view: { ...this.view }, moved: false };
    e.preventDefault();
  }

  move(e) {
    const g = this.drag;
    if (!g) return this.hover(e);
    const { plot } = this.layout;
    const x = Math.min(plot.x1, Math.max(plot.x0, e.offsetX));
    g.moved ||= Math.abs(e.offsetX - g.x) > 2;
    if (g.mode === "pan") {
      const msPerPx = (g.view.to - g.view.from) / (plot.x1 - plot.x0);
      const r = panRange(g.view.from, g.view.to, (g.x - e.offsetX) * msPerPx);
      this.setView(r.from, r.to);
      this.context(this.overlay);
      return;
    }
    g.to = x;
    const ctx = this.context(this.overlay);
    this.tooltip.hidden = true;
    const c = this.colors();
    ctx.fillStyle = c.select;
    ctx.fillRect(Math.min(g.x, x), plot.y0, Math.abs(x - g.x), plot.y1 - plot.y0);
  }

  up(e) {
    const g = this.drag;
    if (!g) return;
    this.drag = null;
    this.context(this.overlay);
    if (!g.moved) return this.hover(e);
    if (g.mode === "pan") {
      this.onView?.({ ...this.view });
      return;
    }
    const r = selectionRange(this.timeAt(g.x), this.timeAt(g.to ?? g.x));
    if (r) {
      this.setView(r.from, r.to);
      this.onView?.(r);
    }
  }

  cancelDrag() {
    if (!this.drag) return;
    const g = this.drag;
    this.drag = null;
    this.context(this.overlay);
    if (g.mode === "pan") this.setView(g.view.from, g.view.to);
  }

  wheel(e) {
    if (!this.layout || !this.data || e.ctrlKey) return; // ctrl+wheel stays the browser's zoom
    e.preventDefault();
    const { plot } = this.layout;
    const { from, to } = this.view;
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? plot.x1 - plot.x0 : 1; // lines, pages to pixels
    const dx = e.deltaX * unit;
    const dy = e.deltaY * unit;
    let r;
    if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) {
      const px = e.shiftKey && !dx ? dy : dx;
      r = panRange(from, to, (px * (to - from)) / (plot.x1 - plot.x0));
    } else {
      r = zoomRange(from, to, this.timeAt(Math.min(plot.x1, Math.max(plot.x0, e.offsetX))), Math.exp(dy * 0.002));
    }
    this.setView(r.from, r.to);
    this.hover(e);
    clearTimeout(this.wheelTimer);
    this.wheelTimer = setTimeout(() => {
      this.wheelTimer = 0;
      this.onView?.({ ...this.view });
    }, WHEEL_SETTLE_MS);
  }

  centerText(ctx, c, plot, text) {
    if (!text) return;
    ctx.fillStyle = c.muted;
    ctx.font = `14px ${c.font}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(text, (plot.x0 + plot.x1) / 2, (plot.y0 + plot.y1) / 2);
    ctx.font = `12px ${c.font}`;
  }

  hatch(ctx, color) {
    const p = document.createElement("canvas");
    const s = Math.round(8 * this.dpr);
    p.width = p.height = s;
    const g = p.getContext("2d");
    g.strokeStyle = color;
    g.lineWidth = Math.max(1, this.dpr);
    g.beginPath();
    g.moveTo(0, s);
    g.lineTo(s, 0);
    g.moveTo(-s / 2, s / 2);
    g.lineTo(s / 2, -s / 2);
    g.moveTo(s / 2, s + s / 2);
    g.lineTo(s + s / 2, s / 2);
    g.stroke();
    const pattern = ctx.createPattern(p, "repeat");
    pattern.setTransform(new DOMMatrix().scale(1 / this.dpr));
    return pattern;
  }

  // ------------------------------------------------------------ hover

  hover(e) {
    this.pointer = e && { offsetX: e.offsetX, offsetY: e.offsetY };
    const ctx = this.context(this.overlay);
    const L = this.layout;
    const d = this.data;
    this.tooltip.hidden = true;
    if (!e || !L || !d || !d.series.some((s) => s.t.length)) return;
    const { plot, xs, ys } = L;
    const { offsetX: x, offsetY: y } = this.pointer;
    if (x < plot.x0 - 4 || x > plot.x1 + 4 || y < plot.y0 - 4 || y > plot.y1 + STRIP.gap + STRIP.height + 4) return;
    const c = this.colors();
    const at = xs.invert(x);
    if (y > plot.y1 + 2) {
      // Over the strip: say which tier served this part of the range.
      const seg = (d.series[0]?.segments ?? []).find((s) => s.from <= at && at < s.to);
      if (!seg) return;
      this.showTooltip(x, y, [
        ["title", `${seg.tier} tier`],
        ["muted", `${formatTime(seg.from, localOffset)} → ${formatTime(seg.to, localOffset)}`],
      ]);
      return;
    }
    // The point nearest the pointer in time, in the series nearest it.
    let best = null;
    for (const s of d.series) {
      const i = nearestIndex(s.t, at);
      if (i < 0) continue;
      const dist = Math.abs(xs(s.t[i]) - x) + Math.abs(ys(s.line.values[i]) - y) / 4;
      if (!best || dist < best.dist) best = { s, i, dist };
    }
    if (!best) return;
    const t = best.s.t[best.i];
    const px = Math.round(xs(t)) + 0.5;
    ctx.strokeStyle = c.axis;
    ctx.lineWidth = 1;
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(px, plot.y0);
    ctx.lineTo(px, plot.y1);
    ctx.stroke();
    ctx.setLineDash([]);

    const lines = [
      ["title", formatTime(t, localOffset)],
      ["muted", `UTC ${formatTime(t)}`],
    ];
    const res = best.s.resolutionMs;
    if (res > 0) {
      const from = formatTime(t, localOffset);
      const to = formatTime(t + res, localOffset);
      const sameDay = from.slice(0, 10) === to.slice(0, 10);
      lines.push(["muted", `${formatDuration(res)} window, ${from.slice(11)} – ${sameDay ? to.slice(11) : to}`]);
    }
    // The series with a point at that time, in order, as many as fit:
    // the one nearest the pointer always among them.
    const index = new Map(d.series.map((s) => [s, s === best.s ? best.i : nearestIndex(s.t, t)]));
    const hit = d.series.filter((s) => index.get(s) >= 0 && (s === best.s || s.t[index.get(s)] === t));
    const keep = new Set([best.s, ...hit.filter((s) => s !== best.s).slice(0, TOOLTIP_SERIES - 1)]);
    const more = hit.length - keep.size;
    for (const s of hit.filter((x) => keep.has(x))) {
      const i = index.get(s);
      const color = c.series[s.slot % SERIES_COLORS];
      ctx.fillStyle = c.bg;
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.arc(px, ys(s.line.values[i]), 4, 0, 2 * Math.PI);
      ctx.fill();
      ctx.stroke();
      if (d.series.length > 1) lines.push(["series", s.id, "", false, color]);
      for (const [name, values] of Object.entries(s.columns)) {
        lines.push(["value", name === "v" ? "value" : name, formatExact(values[i]), name === s.line.name, color]);
      }
    }
    if (more) lines.push(["muted", `and ${more} more`]);
    this.showTooltip(px, ys(best.s.line.values[best.i]), lines);
  }

  showTooltip(x, y, lines) {
    const tip = this.tooltip;
    tip.replaceChildren();
    for (const [kind, a, b, strong, color] of lines) {
      const row = document.createElement("div");
      row.className = "tt-" + kind;
      if (kind === "value") {
        const k = document.createElement("span");
        k.className = "tt-key" + (strong ? " tt-main" : "");
        if (strong && color) k.style.color = color;
        k.textContent = a;
        const v = document.createElement("span");
        v.className = "tt-val";
        v.textContent = b;
        row.append(k, v);
      } else {
        row.textContent = a;
        if (color) row.style.color = color;
      }
      tip.append(row);
    }
    tip.hidden = false;
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    let left = x + 14;
    if (left + w > this.width - 4) left = x - 14 - w;
    let top = y - h / 2;
    top = Math.min(Math.max(4, top), this.height - h - 4);
    tip.style.transform = `translate(${Math.round(Math.max(4, left))}px, ${Math.round(top)}px)`;
  }
}

/** The runs [start, end) cut to the index span [i0, i1) in view. */
function clipRuns(parts, [i0, i1]) {
  const out = [];
  for (const [s, e] of parts) {
    const a = Math.max(s, i0);
    const b = Math.min(e, i1);
    if (b > a) out.push([a, b]);
  }
  return out;
}
