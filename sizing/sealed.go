package sizing

import (
	"math"

	"github.com/tsgate/tsgate/tiers/sealed"
)

// SealedPointBytes is what a sealed raw point costs on disk when its values
// are decimals of a few digits, as exporters print them: 1.53 B on the
// embedded store and 1.62 B on Cassandra for 10 s gauges with three
// decimals (docs/benchmarks.md, "Sealed raw buckets"). Values with a full
// float64 mantissa are sealed as XOR chunks and cost up to some 10 B.
const SealedPointBytes = 1.6

// ChunkOverheadBytes is what a sealed chunk costs besides its points: its
// record's key and the heads of its value and of its encoding.
const ChunkOverheadBytes = 80

// Sealed is the size of one series' raw bucket once sealed: its points
// as chunks of at most sealed.MaxSamples points, in one partition of the
// chunk table (a bucket's event buckets are sealed together).
type Sealed struct {
	Points, Chunks, Bytes float64
}

// SealedBucket sizes a sealed raw bucket of width milliseconds of points
// at rate per second, each costing pointBytes.
func SealedBucket(rate float64, width int64, pointBytes float64) Sealed {
	points := rate * float64(width) / 1000
	chunks := math.Ceil(points / sealed.MaxSamples)
	return Sealed{Points: points, Chunks: chunks, Bytes: points*pointBytes + chunks*ChunkOverheadBytes}
}

// SealedRowBytes is what a sealed rollup row costs on disk, its extras
// included, for the gauges of SealedPointBytes: a minute row's min, max,
// sum and counter values code in a byte or two each, its time and count in
// a bit, its sketch in some 6 B (docs/benchmarks.md, "Sealed rollup
// partitions").
const SealedRowBytes = 18

// SealedPartition sizes a sealed rollup partition of rows rows, each
// costing rowBytes.
func SealedPartition(rows, rowBytes float64) Sealed {
	chunks := math.Ceil(rows / sealed.MaxSamples)
	return Sealed{Points: rows, Chunks: chunks, Bytes: rows*rowBytes + chunks*ChunkOverheadBytes}
}
