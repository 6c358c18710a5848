package tiers

import "context"

// SealReport says what sealing one bucket did.
type SealReport struct {
	// Points is how many points the bucket's chunks hold after the seal;
	// Rows how many rows the seal folded into them.
	Points, Rows int
	// Chunks is how many chunks hold them.
	Chunks int
}

// Sealer is implemented by stores that keep sealed raw buckets and rollup
// partitions in a compressed form. Reads of a partition return the same
// rows before and after a seal: a store merges the sealed points of the partition
// with the rows written to it since, a row winning over a sealed point of
// the same time, and drops sealed points older than the retention they
// were sealed with, as their rows would have expired.
type Sealer interface {
	// SealBucket rewrites the points of the eventBuckets raw partitions
	// (TableRaw) of one bucket of a series, starting at bucket, as
	// compressed chunks that expire with their last point after
	// retention, then deletes their rows. Every point must lie in the
	// partition EventBucket(t, eventBuckets) names, as the write path
	// puts it. Sealing a bucket again stores the same chunks, with any
	// rows written since folded in; a row written while a seal runs is
	// kept, as a row or in the chunks. Several gateways may seal the same
	// bucket at once.
	SealBucket(ctx context.Context, series string, bucket int64, eventBuckets int, retention int64) (SealReport, error)
	// SealRollup rewrites the rows of one partition of a rollup table as
	// compressed chunks that expire with their last row after retention
	// (the tier's), extras included, then deletes the rows, with the
	// guarantees of SealBucket. A rollup row written to the partition
	// afterwards (a correction, an import) stays a row and wins over the
	// sealed row of its time until the next seal folds it in.
	SealRollup(ctx context.Context, key PartitionKey, retention int64) (SealReport, error)
}

// SealedRowsDeleter is implemented by stores whose seal may keep a
// partition's rows for a while after it writes the chunks that hold them
// (Cassandra, for reads in flight). DeleteSealedRows deletes the rows
// whose time has come and returns how many partitions' rows it deleted; a
// row written after the seal stays. The seal worker calls it on every run.
type SealedRowsDeleter interface {
	DeleteSealedRows(ctx context.Context) (int, error)
}
