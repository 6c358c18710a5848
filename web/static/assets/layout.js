// The series' raw layout history, as the dashboard's layout table shows it:
// when each layout starts and ends, and which one is in force now.

import { formatDuration } from "./lib.js";

/**
 * Rows of the layout table for the entries of GET /v1/series/{id}/layout,
 * oldest first: {since, until, bucket, eventBuckets, state}. since is null
 * for the first entry (it governs everything before the next one), until
 * is null for the last; state is "past", "now" or "pending".
 */
export function layoutRows(layouts, now) {
  return layouts.map((e, i) => {
    const next = layouts[i + 1];
    const until = next ? next.since : null;
    let state = "now";
    if (i > 0 && e.since > now) state = "pending";
    else if (until !== null && until <= now) state = "past";
    return {
      since: i === 0 ? null : e.since,
      until,
      bucket: formatDuration(e.bucket_ms),
      eventBuckets: e.event_buckets,
      state,
    };
  });
}
