// Uses the types openapi-typescript generates from api/openapi.yaml with
// Node's fetch against a running gateway (GATEWAY_URL): writes points,
// reads them back raw following cursors and aggregated, and reads a 400
// problem. tsc checks the program against the types; running it checks
// the gateway's answers against the points written.
import type { components, paths } from "./gen/schema.js";

type Schemas = components["schemas"];
type ReadQuery = NonNullable<paths["/v1/series/{id}/points"]["get"]["parameters"]["query"]>;
type ReadAnswer = paths["/v1/series/{id}/points"]["get"]["responses"][200]["content"]["application/json"];
type WriteBody = paths["/v1/points"]["post"]["requestBody"]["content"]["application/json"];
type WriteAnswer = paths["/v1/points"]["post"]["responses"][200]["content"]["application/json"];
type BatchBody = paths["/v1/query"]["post"]["requestBody"]["content"]["application/json"];
type BatchAnswer = paths["/v1/query"]["post"]["responses"][200]["content"]["application/json"];
type Problem = Schemas["Problem"];

const base = process.env.GATEWAY_URL;
if (!base) throw new Error("GATEWAY_URL is not set");

let passed = 0;
let failed = 0;
function check(name: string, ok: boolean, detail: unknown = ""): void {
  if (ok) {
    passed++;
  } else {
    failed++;
    console.error(`FAIL ${name}: ${JSON.stringify(detail)}`);
  }
}

function query(q: ReadQuery): string {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) {
      for (const item of v) s.append(k, String(item));
    } else {
      s.append(k, String(v));
    }
  }
  return s.toString();
}

async function read(series: string, q: ReadQuery): Promise<ReadAnswer> {
  const resp = await fetch(`${base}/v1/series/${encodeURIComponent(series)}/points?${query(q)}`);
  if (resp.status !== 200) throw new Error(`read: ${resp.status} ${await resp.text()}`);
  return (await resp.json()) as ReadAnswer;
}

const minute = 60_000;
const now = Date.now();
const start = Math.floor((now - 3 * 3_600_000) / (10 * minute)) * 10 * minute;
const end = start + 2 * 3_600_000;
const series = `ts-${now}`;
const points: Schemas["Point"][] = [];
for (let i = 0; i < 700; i++) {
  points.push({ series, t: start + i * 11_000, v: Math.round((Math.cos(i / 9) * 40 + (i % 7)) * 100) / 100 });
}

const body: WriteBody = { points };
const wr = await fetch(`${base}/v1/points`, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body),
});
const written = (await wr.json()) as WriteAnswer;
check("write", wr.status === 200 && written.accepted === points.length, written);

// Raw points a page at a time, following next_cursor.
const want = points.filter((p) => Number(p.t) < end).map((p) => [Number(p.t), p.v]);
const got: number[][] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const page = await read(series, { from: String(start), to: String(end), resolution: "raw", limit: 300, cursor });
  pages++;
  for (const row of page.points) got.push(row.map(Number));
  cursor = page.next_cursor;
} while (cursor !== undefined && pages < 10);
check("raw points over pages", JSON.stringify(got) === JSON.stringify(want), { got: got.length, want: want.length });
check("pages", pages === Math.ceil(want.length / 300), pages);

// Three aggregates as an array, sent as a repeated parameter.
const aggs: Schemas["Agg"][] = ["min", "max", "avg"];
const agg = await read(series, { from: String(start), to: String(end), resolution: "10m", agg: aggs });
const windows = new Map<number, number[]>();
for (const [t, v] of want) {
  const w = Math.floor(t! / 600_000) * 600_000;
  windows.set(w, [...(windows.get(w) ?? []), v!]);
}
const wantAgg = [...windows.entries()].map(([w, vs]) => [w, Math.min(...vs), Math.max(...vs), vs.reduce((a, b) => a + b, 0) / vs.length]);
const columns: Schemas["Column"][] = ["t", "min", "max", "avg"];
check("aggregate columns", JSON.stringify(agg.columns) === JSON.stringify(columns), agg.columns);
check(
  "aggregate windows",
  agg.points.length === wantAgg.length &&
    agg.points.every((row, i) => row.length === 4 && row.every((v, j) => Math.abs(Number(v) - wantAgg[i]![j]!) < 1e-9)),
  { got: agg.points.slice(0, 2), want: wantAgg.slice(0, 2) },
);

// A batch with agg as an array and as a comma string.
const batchBody: BatchBody = {
  from: start,
  to: end,
  resolution: "10m",
  queries: [
    { series, agg: ["max", "min"] },
    { series, agg: "max,min" },
  ],
};
const br = await fetch(`${base}/v1/query`, {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(batchBody),
});
const batch = (await br.json()) as BatchAnswer;
check("batch status", br.status === 200, batch);
for (const r of batch.results) {
  if ("error" in r) {
    check("batch result", false, r);
    continue;
  }
  const rows = (r as ReadAnswer).points.map((row) => row.map(Number));
  check("batch windows", JSON.stringify(rows) === JSON.stringify(wantAgg.map((w) => [w[0], w[2], w[1]])), rows.slice(0, 2));
}

// A bad parameter is a problem naming it.
const bad = await fetch(`${base}/v1/series/${series}/points?${query({ from: String(start), limit: 0 })}`);
const problem = (await bad.json()) as Problem;
check("problem status", bad.status === 400 && bad.headers.get("content-type") === "application/problem+json", bad.status);
check("problem names the parameter", problem.status === 400 && problem.errors?.[0]?.param === "limit", problem);

console.log(`typescript client: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
