// The time-series chart, drawn by hand on two stacked canvases: the base
// one holds the grid, axes, the min–max band, the line, the uncovered part
// of the range and the strip of tier segments; the overlay holds the hover
// crosshair, so moving the pointer never redraws the data.

import {
  formatDuration, formatExact, formatTime, formatValue, linearScale, localOffset,
  nearestIndex, runs, timeTicks, uncovered, valueTicks,
} from "./lib.js";

const MARGIN = { left: 64, right: 18, top: 12 };
const STRIP = { gap: 5, height: 7 };
const X_LABELS = 36; // two lines of time labels under the strip
const BOTTOM = STRIP.gap + STRIP.height + X_LABELS;

/** Horizontal space the plot leaves for axes: max_points is the rest of the width. */
export const PLOT_INSET = MARGIN.left + MARGIN.right;

export const TIERS = ["raw", "minute", "hour", "day"];

/**
 * A chart in container, which holds canvas.base, canvas.overlay and
 * div.tooltip. onResize(plotWidth) is called when the plot's width in CSS
 * pixels changes.
 */
export class Chart {
  constructor(container, { onResize } = {}) {
    this.el = container;
    this.base = container.querySelector("canvas.base");
    this.overlay = container.querySelector("canvas.overlay");
    this.tooltip = container.querySelector(".tooltip");
    this.onResize = onResize;
    this.data = null;
    this.message = "";
    this.layout = null;
    this.width = 0;
    this.height = 0;
    this.dpr = 1;
    this.pointer = null;
    new ResizeObserver(() => this.resize()).observe(container);
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => this.draw());
    this.overlay.addEventListener("pointermove", (e) => this.hover(e));
    this.overlay.addEventListener("pointerleave", () => this.hover(null));
    this.resize();
  }

  /** The width of the plot area in CSS pixels. */
  get plotWidth() {
    return Math.max(10, Math.floor(this.el.clientWidth - PLOT_INSET));
  }

  /**
   * Shows an answer: {from, to, t, line: {name, values}, band: {min, max}
   * or null, columns: {name: values}, resolutionMs, segments, covered,
   * partialReason}. With data null, shows message in an empty frame.
   */
  set(data, message = "") {
    this.data = data;
    this.message = message;
    this.draw();
    this.hover(this.pointer);
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
      line: v("--chart-line"), band: v("--chart-band"), bandEdge: v("--chart-band-edge"),
      uncovered: v("--chart-uncovered"), bg: v("--chart-bg"),
      tiers: Object.fromEntries(TIERS.map((t) => [t, v("--tier-" + t)])),
    };
  }

  context(canvas) {
    const ctx = canvas.getContext("2d");
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.height);
    return ctx;
  }

  draw() {
    if (!this.width || !this.height) return;
    const ctx = this.context(this.base);
    const c = this.colors();
    const plot = {
      x0: MARGIN.left, x1: this.width - MARGIN.right,
      y0: MARGIN.top, y1: this.height - BOTTOM,
    };
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
    const xs = linearScale(d.from, d.to, plot.x0, plot.x1);
    let lo = Infinity;
    let hi = -Infinity;
    const extent = (a) => {
      for (let i = 0; i < a.length; i++) {
        if (a[i] < lo) lo = a[i];
        if (a[i] > hi) hi = a[i];
      }
    };
    extent(d.line.values);
    if (d.band) {
      extent(d.band.min);
      extent(d.band.max);
    }
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
    const tt = timeTicks(d.from, d.to, plot.x1 - plot.x0, { minSpacing: 96 });
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

    // The part of the range this answer did not cover.
    const missing = uncovered(d.from, d.to, d.covered);
    if (missing.length) {
      ctx.save();
      ctx.fillStyle = this.hatch(ctx, c.uncovered);
      for (const [a, b] of missing) {
        const x0 = Math.max(plot.x0, xs(a));
        const x1 = Math.min(plot.x1, xs(b));
        if (x1 <= x0) continue;
        ctx.fillRect(x0, plot.y0, x1 - x0, plot.y1 - plot.y0);
        const label = "not covered" + (d.partialReason ? ` (${d.partialReason})` : "");
        if (x1 - x0 > ctx.measureText(label).width + 12) {
          ctx.fillStyle = c.muted;
          ctx.textAlign = "left";
          ctx.fillText(label, x0 + 6, plot.y0 + 6);
          ctx.fillStyle = this.hatch(ctx, c.uncovered);
        }
      }
      ctx.restore();
    }

    ctx.save();
    ctx.beginPath();
    ctx.rect(plot.x0, plot.y0 - 2, plot.x1 - plot.x0, plot.y1 - plot.y0 + 4);
    ctx.clip();
    const parts = runs(d.t, d.resolutionMs);
    if (d.band) this.drawBand(ctx, c, d, parts, xs, ys);
    this.drawLine(ctx, c, d, parts, xs, ys, plot);
    ctx.restore();

    // Axis line and the strip of segments: which tier served which span.
    ctx.strokeStyle = c.axis;
    ctx.beginPath();
    ctx.moveTo(plot.x0, Math.round(plot.y1) + 0.5);
    ctx.lineTo(plot.x1, Math.round(plot.y1) + 0.5);
    ctx.stroke();
    const sy = plot.y1 + STRIP.gap;
    for (const seg of d.segments ?? []) {
      const a = Math.max(plot.x0, xs(seg.from));
      const b = Math.min(plot.x1, xs(seg.to));
      if (b <= a) continue;
      ctx.fillStyle = c.tiers[seg.tier] || c.muted;
      ctx.fillRect(a, sy, Math.max(1, b - a - 1), STRIP.height);
    }
    if (!d.t.length) this.centerText(ctx, c, plot, this.message || "No points in this range");
  }

  drawBand(ctx, c, d, parts, xs, ys) {
    ctx.fillStyle = c.band;
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
  }

  drawLine(ctx, c, d, parts, xs, ys, plot) {
    const v = d.line.values;
    ctx.strokeStyle = c.line;
    ctx.fillStyle = c.line;
    ctx.lineWidth = 1.5;
    ctx.lineJoin = "round";
    const sparse = d.t.length > 0 && (plot.x1 - plot.x0) / d.t.length >= 8;
    for (const [s, e] of parts) {
      if (e - s === 1) {
        ctx.beginPath();
        ctx.arc(xs(d.t[s]), ys(v[s]), 2.5, 0, 2 * Math.PI);
        ctx.fill();
        continue;
      }
      ctx.beginPath();
      if (e - s > 2 * (plot.x1 - plot.x0)) {
        // More points than pixels: per pixel column, its first, lowest,
        // highest and last value keep every peak at a fraction of the work.
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
          else ctx.lineTo(x, ys(first));
          started = true;
          ctx.lineTo(x, ys(lo));
          ctx.lineTo(x, ys(hi));
          ctx.lineTo(x, ys(last));
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
        ctx.moveTo(xs(d.t[s]), ys(v[s]));
        for (let i = s + 1; i < e; i++) ctx.lineTo(xs(d.t[i]), ys(v[i]));
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
    if (!e || !L || !d || !d.t.length) return;
    const { plot, xs, ys } = L;
    const { offsetX: x, offsetY: y } = this.pointer;
    if (x < plot.x0 - 4 || x > plot.x1 + 4 || y < plot.y0 - 4 || y > plot.y1 + STRIP.gap + STRIP.height + 4) return;
    const c = this.colors();
    if (y > plot.y1 + 2) {
      // Over the strip: say which tier served this part of the range.
      const t = xs.invert(x);
      const seg = (d.segments ?? []).find((s) => s.from <= t && t < s.to);
      if (!seg) return;
      this.showTooltip(x, y, [
        ["title", `${seg.tier} tier`],
        ["muted", `${formatTime(seg.from, localOffset)} → ${formatTime(seg.to, localOffset)}`],
      ]);
      return;
    }
    const i = nearestIndex(d.t, xs.invert(x));
    const t = d.t[i];
    const px = Math.round(xs(t)) + 0.5;
    ctx.strokeStyle = c.axis;
    ctx.lineWidth = 1;
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(px, plot.y0);
    ctx.lineTo(px, plot.y1);
    ctx.stroke();
    ctx.setLineDash([]);
    if (d.band) {
      ctx.strokeStyle = c.bandEdge;
      ctx.lineWidth = 2;
      for (const v of [d.band.min[i], d.band.max[i]]) {
        ctx.beginPath();
        ctx.moveTo(px - 5, ys(v));
        ctx.lineTo(px + 5, ys(v));
        ctx.stroke();
      }
    }
    ctx.fillStyle = c.bg;
    ctx.strokeStyle = c.line;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.arc(px, ys(d.line.values[i]), 4, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();

    const lines = [
      ["title", formatTime(t, localOffset)],
      ["muted", `UTC ${formatTime(t)}`],
    ];
    if (d.resolutionMs > 0) {
      const from = formatTime(t, localOffset);
      const to = formatTime(t + d.resolutionMs, localOffset);
      const sameDay = from.slice(0, 10) === to.slice(0, 10);
      lines.push(["muted", `${formatDuration(d.resolutionMs)} window, ${from.slice(11)} – ${sameDay ? to.slice(11) : to}`]);
    }
    for (const [name, values] of Object.entries(d.columns)) {
      lines.push(["value", name === "v" ? "value" : name, formatExact(values[i]), name === d.line.name]);
    }
    this.showTooltip(px, ys(d.line.values[i]), lines);
  }

  showTooltip(x, y, lines) {
    const tip = this.tooltip;
    tip.replaceChildren();
    for (const [kind, a, b, strong] of lines) {
      const row = document.createElement("div");
      row.className = "tt-" + kind;
      if (kind === "value") {
        const k = document.createElement("span");
        k.className = "tt-key" + (strong ? " tt-main" : "");
        k.textContent = a;
        const v = document.createElement("span");
        v.className = "tt-val";
        v.textContent = b;
        row.append(k, v);
      } else {
        row.textContent = a;
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
