// Package embedded is the tiers.Store kept in a local Pebble database: the
// default store of a single gateway, with no Cassandra to run. It owns the
// directory it opens (Pebble locks it against other processes) and
// everything in it.
//
// It keeps the Cassandra tables' logical layout as ordered keys: every
// partition is a contiguous key range whose rows sort by T, so a partition
// read is one bounded range scan, forwards or backwards, and everything
// above tiers.Store behaves the same on both stores. The conformance suite
// in tiers/storetest holds it to that.
//
// # Keys
//
// A key is one kind byte followed by order-preserving fields. A series id is
// its bytes and a NUL terminator (ids never contain NUL, and NUL sorts below
// every id byte, so "a" and all its keys sort before "a.b"). A time is an
// int64 big-endian with the sign bit flipped, so earlier times, negative
// ones included, sort first. An event bucket is a big-endian uint16; only
// points_raw partitions have one (elsewhere it is always 0, and a key that
// says otherwise is refused, as Cassandra refuses it: its other tables have
// no such column).
//
//	0x00 "format"                         format version
//	0x01 series 0x00 bucket eb t          points_raw row
//	0x02 series 0x00 bucket eb t          points_late row (eb always 0)
//	0x03 series 0x00 bucket eb t          rollup_1m row (eb always 0)
//	0x04 series 0x00 bucket eb t          rollup_1h row (eb always 0)
//	0x05 series 0x00 bucket eb t          rollup_1d row (eb always 0)
//	0x06 table 0x00 series 0x00 bucket eb t   row of another rollup table,
//	                                      such as rollup_10s (eb always 0)
//	0x10 series 0x00                      registry: first, last (merged)
//	0x11 series 0x00 since                layout entry: width, event buckets
//	0x12 series 0x00 bucket               late mark
//	0x13 slot series 0x00 window          dirty window
//	0x14                                  oldest dirty slot (merged)
//	0x15 name                             checkpoint (merged)
//	0x16 name                             secret
//
// # Values
//
// Values are fixed-width little-endian. Rows, late marks and dirty windows
// start with their expiry in Unix milliseconds (0 = never); a raw row then
// holds its value as a float64, a rollup row min, max and sum as float64 and
// count as int64. The registry value is first and last as int64; the oldest
// slot and checkpoints are one int64.
//
// # Expiry
//
// Like a Cassandra TTL, a record expires at its time plus its retention: a
// row at T + Retention, a late mark at bucket + Retention, a dirty window at
// its write time + retention. Reads skip records expired by the store's
// clock; writes drop records already expired. A background sweeper deletes
// expired records to reclaim their space, with range deletions for runs of
// expired keys such as whole partitions past their retention.
//
// # Writes without reads
//
// The registry, the oldest dirty slot and the checkpoints are written as
// Pebble merge operands that a merger folds with min and max, so NoteSeries,
// MarkDirty and AdvanceCheckpoint never read and concurrent calls commute,
// as their contracts require. A secret is created under a mutex: Pebble
// allows one process per directory, so that is all it takes for every
// caller to get the value stored first. Every write is synced before it
// returns.
package embedded
