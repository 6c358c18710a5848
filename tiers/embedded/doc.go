// Package embedded is the tiers.Store kept in a local Pebble database: the
// default store of a single gateway, with no Cassandra to run. It owns the
// directory it opens (Pebble locks it against other processes) and
// everything in it.
//
// It keeps the Cassandra tables' logical layout as ordered keys: every
// partition is a contiguous key range whose rows sort by T, so a partition
// read is one bounded range scan, forwards or backwards, and everything
// above tiers.Store behaves the same on both stores. The conformance suite
// in testkit/storetest holds it to that.
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
//	0x07 series 0x00 bucket eb first      sealed chunk of a points_raw
//	                                      bucket, by its first point (eb
//	                                      always 0: it holds them all)
//	0x08 (0x03…0x06 partition) first      sealed chunk of a rollup
//	                                      partition: 0x08, then the
//	                                      partition's row key prefix
//	0x10 series 0x00                      registry: first, last (merged)
//	0x11 series 0x00 since                layout entry: width, event buckets
//	0x12 series 0x00 bucket               late mark
//	0x13 slot series 0x00 window          dirty window
//	0x14                                  oldest dirty slot (merged)
//	0x15 name                             checkpoint (merged)
//	0x16 name                             secret
//	0x17 series                           blocked series: since, reason
//	0x19 series 0x00                      generation
//	0x1a series 0x00                      labels of the series
//	0x1b name 0x00 value series 0x00      posting: the series has the pair
//	0x1c name 0x00 value                  a value some series has
//	0x1d name                             a name some series has
//
// The label index (tiers.LabelIndex) is the last four kinds. A label name
// never holds NUL (SetLabels refuses it), so it ends with one; a value is
// UTF-8 and may, so it is written with each NUL as 0x00 0xff and ends with
// 0x00 0x01: values then sort as their bytes do, and the postings of one
// pair are a key range no other pair's postings share. Postings, values
// and names have empty values; Postings, LabelValues and LabelNames are
// each one prefix scan in the order they return. A store written before
// labels existed has none of these keys, and its series have no labels.
//
// # Values
//
// Values are fixed-width little-endian. Rows, late marks and dirty windows
// start with their expiry in Unix milliseconds (0 = never); a raw row then
// holds its value as a float64, a rollup row min, max and sum as float64 and
// count as int64, then its extras (tiers.AppendExtras: the counter summary
// and the quantile sketch, tens of bytes for a minute row, never more than
// 2 KiB). A rollup row of exactly 40 bytes has no extras: every row of a
// format 1 store, the format before rollup rows kept them, which Open
// reads as it is and stamps with the current format (4; format 2 stores,
// whose chunks and extras predate the compact forms, and format 3 stores,
// which predate sealed rollup partitions, are read as they are and
// stamped too). Extras sit in the row's value
// so that they cost no key of their own on disk; reads that do not ask
// for them skip them without decoding. A sealed chunk holds its expiry (its last point plus the
// retention it was sealed with), that retention as an int64 and the
// chunk's bytes (tiers/sealed). The registry value is first and last as int64; the oldest
// slot and checkpoints are one int64. A labels record is the pairs in name
// order, each name and value preceded by its length as a uvarint.
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
// # Sealed buckets
//
// SealBucket (tiers.Sealer) rewrites the points_raw partitions of a bucket
// as chunks holding the points of all of them: under the lock that writes
// of expiring records hold shared, it reads the bucket's chunks and rows,
// and commits one batch that deletes every key it read and sets the new
// chunks, so a read sees the bucket before or after, and no write lands
// between the read and the deletion. A partition read decodes the chunks
// of its bucket that overlap its span, keeps the points of its event
// bucket that have not outlived the retention, and merges the rows
// written since over them. SealRollup does the same for one rollup
// partition, its rows and their extras column by column
// (sealed.EncodeRollup), under kind 0x08.
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
//
// SetLabels reads the series' labels and writes its postings, entries,
// record and deletions in one atomic batch, so the order the interface
// asks for (postings before the record, deletions after it) holds at
// every instant. Calls for one series are ordered by a mutex per stripe
// of ids; a call that may remove value or name entries checks that no
// posting (no value) is left, through the batch itself, while holding
// exclusively the lock that calls adding entries hold shared.
package embedded
