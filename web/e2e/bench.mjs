// Frame time of the dashboard's chart with 100,000 points in view, in
// Debian's Chromium against a real gateway (docs/benchmarks.md):
//
//	cd web/e2e && npm ci && node bench.mjs [points]
//
// It writes one raw series of one point a second, opens it at
// resolution=raw (every point on the chart), then zooms with the wheel in
// small steps and measures two things in the page: the time of the redraw
// each wheel event triggers (performance.now() around dispatching it; the
// chart redraws synchronously) and the requestAnimationFrame intervals
// while a wheel event arrives every frame.

import { loadavg } from "node:os";

import { launch, afterLoad } from "./browser.mjs";
import { T0, fillDense, start } from "./gateway.mjs";

const N = Number(process.argv[2] || 100_000);
const ID = "bench.dense";

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const p95 = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length * 0.95)];
const fmt = (a) => `median ${median(a).toFixed(2)} ms, p95 ${p95(a).toFixed(2)} ms, max ${Math.max(...a).toFixed(2)} ms (n=${a.length})`;

const load = () => loadavg().map((x) => x.toFixed(2)).join(" ");
console.log(`load average before: ${load()}`);
const gw = await start();
let browser;
try {
  await fillDense(gw.url, ID, N);
  browser = await launch();
  const { page } = browser;
  const from = new Date(T0).toISOString();
  const to = new Date(T0 + N * 1000).toISOString();
  await afterLoad(page, () => page.goto(`${gw.url}/#series=${ID}&from=${from}&to=${to}&res=raw`));
  const shown = await page.textContent("#facts");
  const points = /Points(\d[\d,]*)/.exec(shown)?.[1];
  console.log(`chart holds ${points} raw points (${N} written)`);

  const result = await page.evaluate(async () => {
    const overlay = document.querySelector("#chart canvas.overlay");
    const r = overlay.getBoundingClientRect();
    const wheel = (dy, shift = false) => new WheelEvent("wheel", {
      deltaY: dy, shiftKey: shift, clientX: r.left + r.width * 0.6, clientY: r.top + r.height / 2, bubbles: true, cancelable: true,
    });
    // Warm up, then time redraws with (nearly) all points in view: each
    // step zooms in by 2% around the pointer and the next zooms back out.
    for (let i = 0; i < 5; i++) overlay.dispatchEvent(wheel(i % 2 ? 10 : -10));
    const redraw = [];
    for (let i = 0; i < 60; i++) {
      const t0 = performance.now();
      overlay.dispatchEvent(wheel(i % 2 ? 10 : -10));
      redraw.push(performance.now() - t0);
    }
    // The same with the canvas flushed: reading a pixel waits until the
    // drawing is rasterized, which a browser otherwise defers.
    const base = document.querySelector("#chart canvas.base").getContext("2d");
    const flushed = [];
    for (let i = 0; i < 60; i++) {
      const t0 = performance.now();
      overlay.dispatchEvent(wheel(i % 2 ? 10 : -10));
      base.getImageData(0, 0, 1, 1);
      flushed.push(performance.now() - t0);
    }
    const pan = [];
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now();
      overlay.dispatchEvent(wheel(i % 2 ? 40 : -40, true));
      pan.push(performance.now() - t0);
    }
    // Frame intervals while zooming in steadily, one wheel event a frame,
    // and, for comparison, while idle: headless Chromium paces frames
    // without a display, so the idle interval is the floor.
    const rafs = (work) => new Promise((done) => {
      const frames = [];
      let last = 0;
      let n = 0;
      const step = (now) => {
        if (last) frames.push(now - last);
        last = now;
        work(n);
        if (++n < 90) requestAnimationFrame(step);
        else done(frames);
      };
      requestAnimationFrame(step);
    });
    const idle = await rafs(() => {});
    const frames = await rafs((n) => overlay.dispatchEvent(wheel(n % 40 < 20 ? -15 : 15)));
    return { redraw, flushed, pan, frames, idle };
  });
  console.log(`redraw on a wheel zoom: ${fmt(result.redraw)}`);
  console.log(`redraw on a wheel zoom, rasterized: ${fmt(result.flushed)}`);
  console.log(`redraw on a shift+wheel pan: ${fmt(result.pan)}`);
  console.log(`requestAnimationFrame interval while zooming: ${fmt(result.frames)}`);
  console.log(`requestAnimationFrame interval while idle: ${fmt(result.idle)}`);
  console.log(`load average after: ${load()}`);
} finally {
  await browser?.close();
  await gw.stop();
}
