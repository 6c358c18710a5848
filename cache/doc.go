// Package cache keeps what the gateway reads over and over: series metadata
// (read-through, for a short time, widened in place by local writes), the
// blocked list, and the rows that can no longer change.
//
// Rows are cached as whole final buckets (Buckets): the event-bucket
// partitions of a bucket merged into one ascending run, keyed by table,
// series, bucket and layout but not by the span a read asked for, so any
// paging of any range in either order is a slice of the same entry.
//
// A bucket is cached only when a predicate (Finality.Final) says its rows
// are final — a closed raw bucket past the late-data window, a rollup
// bucket no late point can still correct, a late partition read under its
// late-index version — so the cache never holds data that a write could
// change without changing the key. Entries need no invalidation, except
// after imports of history into buckets that were final, which invalidate
// the series' entries. Concurrent misses of one key load once; the cache
// is bounded in bytes.
package cache
