package tiers

import "context"

// SealReport says what sealing one partition did.
type SealReport struct {
	// Points is how many points the partition's chunks hold after the
	// seal; Rows how many of them were rows before it.
	Points, Rows int
	// Chunks is how many chunks hold them.
	Chunks int
}

// Sealer is implemented by stores that keep sealed raw partitions in a
// compressed form. Reads of a raw partition return the same points before
// and after a seal: a store merges the partition's sealed points with the
// rows written to it since, a row winning over a sealed point of the same
// time, and drops sealed points older than the retention they were sealed
// with, as their rows would have expired.
type Sealer interface {
	// SealPartition rewrites the points of one raw partition (key.Table is
	// TableRaw) as compressed chunks that expire with their last point
	// after retention, then deletes its rows. Sealing a partition again
	// stores the same chunks, with any rows written since folded in; a
	// row written while a seal runs is kept, as a row or in the chunks.
	// Several gateways may seal the same partition at once.
	SealPartition(ctx context.Context, key PartitionKey, retention int64) (SealReport, error)
}
