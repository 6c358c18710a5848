// Package cassandra is the Apache Cassandra implementation of tiers.Store,
// and the CQL schema it needs (`gateway schema` prints it, --apply creates
// it). It owns every table in its keyspace and is the only package besides
// the integration tests that imports the driver.
//
// # Data model
//
// Times are stored as CQL timestamps, which are the gateway's int64 Unix
// milliseconds exactly (they are bound and scanned as int64, never through
// time.Time). All time-series tables cluster by t ascending; descending
// reads use ORDER BY t DESC within one partition.
//
//	points_raw   ((series text, bucket timestamp, eb smallint), t timestamp) → v double
//	points_raw_chunks
//	             ((series, bucket, eb), first timestamp) → last timestamp,
//	             retention bigint, sealed_at timestamp, data blob
//	points_late  ((series, bucket), t) → v
//	rollup_1m, rollup_1h, rollup_1d
//	             ((series, bucket), t) → min double, max double, sum double, count bigint,
//	                                     extras blob
//
// extras is what a rollup row keeps besides its aggregates, in the
// encoding tiers.AppendExtras defines for both stores: the counter
// summary a reset-aware increase needs and the window's quantile sketch
// (DDSketch's binary encoding), tens of bytes for a minute row and at
// most 2 KiB. Only reads that ask for extras select the column. Rows
// written before the column existed have none (null), and read as rows
// whose extras know nothing until their window is rolled up again.
//
// One table per tier of the pyramid (tiers.Table is the table name), plus
// the late table, which holds raw points that arrived after the lateness
// threshold, in the raw tier's buckets. Each uses time-window compaction
// with a window of the tier's bucket width (the late table: one day, since
// its points arrive out of order), a default_time_to_live of the tier's
// retention as a safety net, and a gc_grace_seconds keyed by the bucket
// width after the seeds' table (hourly 4 h, daily 1 d, weekly 3 d, monthly
// and longer 7 d): the data is never deleted, only expired, so gc_grace
// need only cover the repair interval. Every row is written with its own TTL
// so that it expires at T + Retention; rows past that are not written.
//
// points_raw_chunks holds sealed raw buckets (tiers.Sealer, tiers/sealed):
// the points of all of a bucket's event buckets as compressed chunks under
// eb 0, each expiring with its last point. Sealing is the one place that
// deletes data: a bucket's rows are deleted with partition deletes once
// its chunks hold them (see SealBucket), and its chunks are replaced when
// an import is folded in. rollup_1m_chunks and the like, one beside each
// rollup table and partitioned as it is, hold its sealed partitions: the
// rows as rollup chunks (sealed.EncodeRollup), sealed the same way
// (SealRollup). A seal keeps the rows it folded in for SealedRowsGrace,
// for reads in flight, and notes them in sealed_rows_due;
// DeleteSealedRows, which the seal worker runs, deletes them after it.
//
// A read of a sealed partition reads its chunks first, and its rows only
// when it must: a write to a partition whose bucket may have ended
// (tiers.PartitionWrite.Open unset: late corrections of the rollup
// worker, backfills, imports) leaves a mark in the chunk partition, a row
// before every chunk written after the rows; the seal that folds them in
// deletes it. Chunks sealed before the keyspace's first gateway to keep
// marks (gateway_meta chunk_marks_since) may have unmarked rows beside
// them, and are read with their rows. So a sealed partition costs a read
// one query, not two.
//
//	late_buckets  ((series text), bucket timestamp)            marks, TTL each
//	series        ((shard int), id text) → first timestamp, last timestamp,
//	              generation bigint, labels frozen<map<text, text>>, labels_pending blob
//	series_layout ((series text), since timestamp) → width bigint, event_buckets int
//	rollup_dirty  ((slot timestamp, shard int), series text, window timestamp)
//	rollup_state  (name text PRIMARY KEY) → value bigint
//	gateway_meta  (name text PRIMARY KEY) → value blob
//	sealed_rows_due ((day int, shard int), due timestamp, tbl text, series text, bucket timestamp)
//	              → written list<bigint>
//
//	label_postings ((name text, value text, shard int), series text)
//	label_values   ((name text, shard int), value text)
//	label_names    ((shard int), name text)
//
// The registry spreads ids over 16 shard partitions by FNV-1a of the id, so
// that a listing is a k-way merge of 16 clustering-ordered id ranges, and
// the rollup log spreads a slot over 4 partitions the same way. Both counts
// are part of the on-disk format.
//
// # Labels
//
// A series' labels are a column of its registry row, so that LookupSeries
// and ListSeries return them in the same read, and SeriesLabels reads the
// labels of many series with IN over the ids of one registry partition. The
// label index splits the same way: a posting lives in its series' registry
// shard, a value entry in one of 16 shards of its name by FNV-1a of the
// value, a name in one of 4 by FNV-1a of the name; a read queries every
// shard with one query, IN over the shards, and merges them. No partition of the index grows past the
// registry's (a pair every series holds has as many rows per partition as a
// registry shard). SetLabels writes postings, then value entries and the
// record, then name entries, then deletes what the series lost, each step
// acknowledged before the next, with write timestamps from one clock per
// process; see SetLabels for why entries that no series needs any more are
// deleted safely.
//
// # Nothing is read before a write
//
// A series' first and last point, a checkpoint and the oldest dirty slot
// must only ever widen, grow or shrink, under concurrent writers, without
// reading. Cassandra keeps the cell with the largest write timestamp, so
// these cells are written USING TIMESTAMP derived from the value: growing
// with it where the largest must win (last, checkpoints), shrinking with it
// where the smallest must win (first, the oldest slot). See maxWinsStamp.
// Secrets, which must be agreed on exactly once, are the only lightweight
// transaction (INSERT ... IF NOT EXISTS). SetLabels is the one write that
// reads first: the series' old labels say which postings to delete.
//
// # Requests
//
// Every statement is prepared (the driver prepares and caches them) and
// names its whole partition key with bind markers, so the token-aware
// policy sends it to a replica. A read is one partition, paged by the
// driver with the caller's page size (capped by Config.PageSize). Five
// reads are IN over partitions, each bounded: the first page of each
// event bucket of one raw bucket, asked by the reads of the bucket that
// one reader makes together (tiers.BucketReads); the chunks of one
// series' sealed rollup partitions over up to maxBatchBuckets ended
// buckets, asked by the reads of one reader (tiers.PartitionBatch); the
// first page of one bucket's partitions for the series of one request,
// up to maxSeriesPages partitions (tiers.SeriesReads); a
// label index entry's shards; and the late index of up to 100 series of
// one request (LateBucketsOf). Writes are UNLOGGED batches of one partition each, at
// most Config.MaxBatchRows statements, Config.WriteParallelism at once;
// the exception is a step of SetLabels, a few one-row partitions of the
// label index written as one batch (see execIndex). Every request runs at
// Config.Consistency under the caller's context.
package cassandra
