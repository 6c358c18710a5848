// A real gateway for the browser tests: built from this checkout with the
// go command, served on the embedded store in a fresh directory on a free
// loopback port, and filled with points at fixed times so that the page
// looks the same on every run.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const ROOT = new URL("../../", import.meta.url).pathname;

/** 2026-01-10T00:00:00Z: the start of the written points. */
export const T0 = Date.UTC(2026, 0, 10);
export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

// An operator's pyramid with its own tier names, so that the page can only
// show them by reading them from the gateway. The points are older than
// the default raw retention (7d): the tiers keep them for ten years. The
// rollup worker runs only when asked, so which tier serves what does not
// depend on timing.
export const TIER_NAMES = ["raw", "fine", "coarse", "daily"];
const PYRAMID = ["--tiers", [
  "name=raw,bucket=1h,event-buckets=4,retention=3650d,auto-max=6h",
  "name=fine,step=1m,bucket=1d,retention=3650d,auto-max=7d",
  "name=coarse,step=1h,bucket=30d,retention=3650d,auto-max=90d",
  "name=daily,step=1d,bucket=365d,retention=0s",
].join(";")];

/** Builds the gateway into dir and returns the binary's path. */
export function build(dir) {
  const bin = join(dir, "gateway");
  try {
    execFileSync("go", ["build", "-o", bin, "./cmd/gateway"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    if (err.code === "ENOENT") throw new Error("the browser tests build the gateway and need the go command on PATH");
    throw new Error(`go build ./cmd/gateway failed:\n${err.stderr}`);
  }
  return bin;
}

/**
 * Starts `gateway serve` on 127.0.0.1 and a port the kernel picks, and
 * resolves {url, stop, dir} once it listens.
 */
export async function start({ extraArgs = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "tsgate-e2e-"));
  const bin = build(dir);
  const args = ["serve", "--addr", "127.0.0.1:0", "--data-dir", join(dir, "data"), "--rollup-interval", "0", ...PYRAMID, ...extraArgs];
  const proc = spawn(bin, args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start within 20s:\n${output}`)), 20_000);
    const seen = (chunk) => {
      output += chunk;
      const m = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", seen);
    proc.stderr.on("data", seen);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the gateway exited with ${code}:\n${output}`));
    });
  });
  proc.removeAllListeners("exit");
  const stop = async () => {
    if (proc.exitCode === null) {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (proc.exitCode === null) proc.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { url, stop, dir, log: () => output };
}

/** POSTs body as JSON (or nothing, when body is undefined) to the gateway and returns the parsed answer, failing on any non-2xx. */
export async function post(url, path, body) {
  const init = body === undefined ? { method: "POST" } : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const res = await fetch(url + path, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

export async function getJSON(url, path) {
  const res = await fetch(url + path);
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

/**
 * The test series: two days of one point a minute from T0, values from
 * closed formulas rounded to two decimals (so they print the same
 * everywhere).
 */
export const SERIES = {
  "e2e.temperature": (i) => 20 + 5 * Math.sin((2 * Math.PI * i) / 720) + ((i * 37) % 11) / 10,
  "e2e.pressure": (i) => 14 + 6 * Math.cos((2 * Math.PI * i) / 1440) + ((i * 53) % 7) / 10,
  "e2e.load": (i) => (i % 360 < 180 ? 10 : 25) + ((i * 17) % 5),
};

/** Writes SERIES and runs the rollups, so that the tiers hold them. */
export async function fill(url, minutes = 2 * 24 * 60) {
  for (const [id, f] of Object.entries(SERIES)) {
    const points = [];
    for (let i = 0; i < minutes; i++) points.push({ series: id, t: T0 + i * MINUTE, v: Math.round(f(i) * 100) / 100 });
    const { accepted } = await post(url, "/v1/points", { points });
    if (accepted !== points.length) throw new Error(`${id}: ${accepted} of ${points.length} points accepted`);
  }
  await post(url, "/v1/admin/rollups/run"); // a run takes no body
}

/**
 * Labelled series, for selectors and groups: cpu on four hosts in two data
 * centers, and mem on one of them. Values as in SERIES.
 */
export const LABELLED = {
  "e2e.cpu.eu.a": { labels: { __name__: "cpu", dc: "eu", host: "a" }, f: (i) => 40 + 10 * Math.sin((2 * Math.PI * i) / 480) + ((i * 13) % 7) / 10 },
  "e2e.cpu.eu.b": { labels: { __name__: "cpu", dc: "eu", host: "b" }, f: (i) => 60 + 8 * Math.cos((2 * Math.PI * i) / 720) + ((i * 29) % 5) / 10 },
  "e2e.cpu.us.c": { labels: { __name__: "cpu", dc: "us", host: "c" }, f: (i) => 20 + 6 * Math.sin((2 * Math.PI * i) / 960 + 1) + ((i * 7) % 3) / 10 },
  "e2e.cpu.us.d": { labels: { __name__: "cpu", dc: "us", host: "d" }, f: (i) => (i % 240 < 120 ? 28 : 36) + ((i * 11) % 9) / 10 },
  "e2e.mem.eu.a": { labels: { __name__: "mem", dc: "eu", host: "a" }, f: (i) => 70 + 5 * Math.sin((2 * Math.PI * i) / 1440) },
};

/** Writes LABELLED, each series with its labels (series_labels), and runs the rollups. */
export async function fillLabelled(url, minutes = 2 * 24 * 60) {
  for (const [id, { labels, f }] of Object.entries(LABELLED)) {
    const points = [];
    for (let i = 0; i < minutes; i++) points.push({ series: id, t: T0 + i * MINUTE, v: Math.round(f(i) * 100) / 100 });
    const { accepted } = await post(url, "/v1/points", { points, series_labels: { [id]: labels } });
    if (accepted !== points.length) throw new Error(`${id}: ${accepted} of ${points.length} points accepted`);
  }
  await post(url, "/v1/admin/rollups/run");
}

/** Writes n raw points of one series, one a second from T0, for the frame-time benchmark. */
export async function fillDense(url, id, n) {
  for (let start = 0; start < n; start += 50_000) {
    const points = [];
    for (let i = start; i < Math.min(n, start + 50_000); i++) {
      points.push({ series: id, t: T0 + i * 1000, v: Math.round((50 + 30 * Math.sin(i / 900) + 8 * Math.sin(i / 37) + ((i * 7919) % 13)) * 100) / 100 });
    }
    await post(url, "/v1/points", { points });
  }
}
