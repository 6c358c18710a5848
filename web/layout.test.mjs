// Unit tests of the layout table's rows (node --test web/).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { layoutRows } from "./static/assets/layout.js";

const H = 3_600_000;

describe("layout history", () => {
  it("shows a default layout as in force since always", () => {
    assert.deepEqual(layoutRows([{ since: 0, bucket_ms: H, event_buckets: 4 }], 10 * H), [
      { since: null, until: null, bucket: "1h", eventBuckets: 4, state: "now" },
    ]);
  });
  it("marks past, current and pending entries", () => {
    const l = [
      { since: 0, bucket_ms: H, event_buckets: 4 },
      { since: 5 * H, bucket_ms: H, event_buckets: 8 },
      { since: 20 * H, bucket_ms: 30 * 60_000, event_buckets: 8 },
    ];
    assert.deepEqual(layoutRows(l, 10 * H).map((r) => [r.since, r.until, r.bucket, r.eventBuckets, r.state]), [
      [null, 5 * H, "1h", 4, "past"],
      [5 * H, 20 * H, "1h", 8, "now"],
      [20 * H, null, "30m", 8, "pending"],
    ]);
    assert.equal(layoutRows(l, 20 * H)[2].state, "now");
    assert.equal(layoutRows(l, 20 * H)[1].state, "past");
  });
});
