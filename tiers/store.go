package tiers

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"

	"github.com/tsgate/tsgate/failure"
)

// Row is one stored row. A raw point is a row with Count 1 and Min, Max and
// Sum all equal to its value; a rollup row aggregates the raw points of the
// window [T, T+Step). Carrying aggregates in every row lets one merge and one
// windowing path serve every tier.
type Row struct {
	T        int64
	Min, Max float64
	Sum      float64
	Count    int64
	// X holds the rollup row's extras — its quantile sketch and counter
	// summary — when the read asked for them (ReadRequest.Extras), or the
	// window's a fold built (AddExtras); nil for raw points and for every
	// row of an ordinary read. See Extras.
	X *Extras
}

// PointRow returns the row of the raw point (t, v).
func PointRow(t int64, v float64) Row { return Row{T: t, Min: v, Max: v, Sum: v, Count: 1} }

// Value is a raw point's value.
func (r Row) Value() float64 { return r.Sum }

// IsStale reports whether r is a stale marker: the raw point Prometheus
// writes (value.StaleNaN) when a series ends — its target went away, or
// it stopped being exported. The raw tier keeps them so that PromQL's
// lookback ends where Prometheus' would; every other read passes over
// them (partial.FetchOptions.KeepStale) and rollups never hold them.
func IsStale(r Row) bool { return math.Float64bits(r.Sum) == StaleNaN }

// StaleNaN is the bits of Prometheus' stale marker (value.StaleNaN in
// prometheus/model/value), a NaN no arithmetic produces.
const StaleNaN uint64 = 0x7ff0000000000002

// Add folds o into r's aggregates (r keeps its T; its X is left alone: see
// AddExtras).
func (r *Row) Add(o Row) {
	if r.Count == 0 {
		r.Min, r.Max, r.Sum, r.Count = o.Min, o.Max, o.Sum, o.Count
		return
	}
	r.Min = min(r.Min, o.Min)
	r.Max = max(r.Max, o.Max)
	r.Sum += o.Sum
	r.Count += o.Count
}

// PartitionKey names one partition: the rows of one series in one bucket of
// one table. EventBucket is always 0 outside TableRaw: only raw points are
// split into event buckets.
type PartitionKey struct {
	Table       Table
	Series      string
	Bucket      int64
	EventBucket int
}

// PartitionWrite is a set of rows for one partition. Each row expires at
// T + Retention (never, when Retention is 0); rows already expired at write
// time are the caller's error. A rollup row's extras (Row.X) are stored
// with it (AppendExtras); a rollup row without them is stored without
// extras, and reads back with Extras that know nothing.
type PartitionWrite struct {
	Key       PartitionKey
	Retention int64
	Rows      []Row
	// Open says the partition's bucket ends after the writer's now: no
	// seal can have folded the partition yet, nor can one before the
	// write lands, since a seal waits for the end plus the lateness and
	// its grace. A store that keeps a sealed partition's chunks apart
	// from its rows then needs not tell its readers that the partition
	// got rows after its seal. False is always safe; it costs the store
	// one more write for the partition.
	Open bool
}

// ReadRequest asks for the rows of one partition whose T lies in Span, in
// ascending T order (descending when Desc is set), PageSize rows at a time.
type ReadRequest struct {
	Key      PartitionKey
	Span     Span
	Desc     bool
	PageSize int
	// Version, when not 0, is the late index's version of a late
	// partition's bucket at the time of the read (see LateBucket): rows
	// read under one version are the same for as long as it holds. Stores
	// ignore it; caches key on it.
	Version int64
	// Extras asks for the extras of rollup rows too (Row.X; see Extras):
	// every rollup row read then carries them. Reads of raw tables ignore
	// it. Ordinary reads leave it unset and pay nothing for them.
	Extras bool
	// End, when not 0, is the end of the partition's bucket. A store that
	// keeps sealed partitions' chunks apart from their rows reads only the
	// rows of a partition that ends after its now: no seal can have folded
	// them yet, as with PartitionWrite.Open. It changes no answer.
	End int64
	// Together, when set, is shared by the reads of the event-bucket
	// partitions of one bucket that a reader makes at once: a store may
	// answer all of them with one query (see BucketReads). Stores that
	// do not ignore it.
	Together *BucketReads
	// Batch, when set, is shared by the reads of one series' partitions
	// of a rollup table, over consecutive buckets, that a reader makes:
	// a store may read their sealed form with one query (see
	// PartitionBatch). Stores that do not ignore it.
	Batch *PartitionBatch
	// Across, when set, is shared by the reads of one bucket's partitions
	// across the series of a request: a store may answer them with one
	// query (see SeriesReads). Stores that do not ignore it.
	Across *SeriesReads
}

// BucketReads ties together the reads of one bucket's event-bucket
// partitions made at once by one reader, so that a store can serve them
// with one query made by whichever read asks first. Only reads of one
// logical read share it: a query started before a write was acknowledged
// never answers a read started after it.
type BucketReads struct {
	// EventBuckets is the bucket's partition count.
	EventBuckets int

	sharedLoad
}

// PartitionBatch ties together the reads of one series' partitions of
// one rollup table, over consecutive buckets, made by one reader, so that
// a store can read their sealed form with one query made by whichever
// read asks first: a week of minute rows is then a query a series rather
// than one a day. The same rule as BucketReads': only reads of one
// logical read share it.
type PartitionBatch struct {
	// Buckets are the starts of the partitions' buckets.
	Buckets []int64

	sharedLoad
}

// Has reports whether the partition of bucket is one of the batch's.
func (b *PartitionBatch) Has(bucket int64) bool { return slices.Contains(b.Buckets, bucket) }

// SeriesReads ties together the reads of one bucket's partitions of a
// table across the series of one request, made by its reads of the
// bucket that has not ended: a store can answer them with one query made
// by whichever read asks first, so that a refreshed panel of many series
// costs a query a table rather than one a series. The same rule as
// BucketReads': only reads of one logical read share it.
type SeriesReads struct {
	// Series are the request's series.
	Series []string
	// EventBuckets is, for a raw bucket, its partition count, the same
	// for every series sharing it; 1 for a rollup bucket.
	EventBuckets int

	sharedLoad
}

// sharedLoad is the outcome of a load made once for several readers.
type sharedLoad struct {
	mu   sync.Mutex
	done chan struct{}
	val  any
	err  error
}

// Do returns what load returns, calling it for the first caller only;
// the others wait for its outcome, or for their own ctx.
func (b *sharedLoad) Do(ctx context.Context, load func() (any, error)) (any, error) {
	b.mu.Lock()
	if b.done == nil {
		b.done = make(chan struct{})
		b.mu.Unlock()
		b.val, b.err = load()
		close(b.done)
		return b.val, b.err
	}
	done := b.done
	b.mu.Unlock()
	select {
	case <-done:
		return b.val, b.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// RowPages iterates over the pages of one partition read.
type RowPages interface {
	// Next returns the next non-empty page, in the requested order, or
	// ErrDone when the partition has no more rows in the span. Any other error
	// ends the read; the rows returned before it are valid. The caller owns
	// the returned slice.
	Next() ([]Row, error)
	// Close releases the read. It is safe to call at any point, more than
	// once.
	Close() error
}

// ErrDone is returned by RowPages.Next after the last page.
var ErrDone = errors.New("tiers: no more rows")

// ErrNotFound is returned for a series the registry does not know.
var ErrNotFound = failure.New(failure.NotFound, "tiers: not found")

// PartitionReader reads one partition at a time. Reads of different
// partitions may run concurrently.
type PartitionReader interface {
	// Read starts reading one partition. ctx bounds the whole read, every
	// page included; the read stops with ctx's error once it is done.
	Read(ctx context.Context, req ReadRequest) RowPages
}

// PartitionWriter stores rows.
type PartitionWriter interface {
	// Write upserts the rows: a row replaces any row of the same partition and
	// T. It returns once every row is durable (on Cassandra, acknowledged at
	// the configured consistency). On error some rows may be stored; writes
	// are idempotent, so the caller retries the whole call.
	Write(ctx context.Context, writes []PartitionWrite) error
}

// SeriesInfo is the registry's record of one series: the times of its first
// and last point (both inclusive).
type SeriesInfo struct {
	ID          string
	First, Last int64
	// Labels are the series' labels (see LabelIndex), nil when it has
	// none. LookupSeries and ListSeries fill them from the same read as
	// the rest; NoteSeries ignores them.
	Labels Labels
	// Layout is the raw tier's partitioning history of the series; nil means
	// the raw tier's default layout. Only LookupSeries fills it.
	Layout Layout
	// Generation, when not 0, is the version of the series' last rewrite
	// mark (see Registry.MarkRewritten): rows that readers may cache as
	// final were rewritten after the fact, and a cache keys on it. Only
	// LookupSeries fills it.
	Generation int64
}

// Span returns [First, Last+1), the instants where the series can have
// points.
func (s SeriesInfo) Span() Span { return Span{From: s.First, To: s.Last + 1} }

// Registry records which series exist and the span of their points.
type Registry interface {
	// NoteSeries widens each series' [First, Last] to include the given
	// span, creating the series if needed. It never reads: concurrent calls
	// commute, so ingest can call it on every batch.
	NoteSeries(ctx context.Context, spans []SeriesInfo) error
	// LookupSeries returns one series, its layout included, or ErrNotFound.
	LookupSeries(ctx context.Context, id string) (SeriesInfo, error)
	// ListSeries returns up to limit series whose id starts with prefix and
	// sorts after `after` (all, when after is empty), in ascending id order.
	ListSeries(ctx context.Context, prefix, after string, limit int) ([]SeriesInfo, error)
	// MarkRewritten gives each series, one the registry has (NoteSeries
	// first), a new generation, never 0 and never an earlier value (no
	// read): a writer calls it once it has rewritten rows of the series
	// that readers may cache as final — rollup rows of history an import
	// aggregated — so that caches keyed on the generation load them again.
	MarkRewritten(ctx context.Context, ids []string) error
	// AppendLayout records that, from entry.Since on, the series' raw points
	// are partitioned as entry says. Entries must be appended in increasing
	// Since order and Since must lie in the future of every stored point.
	AppendLayout(ctx context.Context, id string, entry LayoutEntry) error
}

// RegistryBatch looks many series up at once.
type RegistryBatch interface {
	// LookupSeriesOf returns the series of ids the registry has, each as
	// LookupSeries returns it; the ids it lacks are absent.
	LookupSeriesOf(ctx context.Context, ids []string) (map[string]SeriesInfo, error)
}

// LookupEach looks each of ids up with lookup and answers as
// RegistryBatch.LookupSeriesOf does: the ids lookup does not find
// (ErrNotFound) are absent.
func LookupEach(ctx context.Context, ids []string, lookup func(context.Context, string) (SeriesInfo, error)) (map[string]SeriesInfo, error) {
	out := make(map[string]SeriesInfo, len(ids))
	for _, id := range ids {
		info, err := lookup(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		default:
			out[id] = info
		}
	}
	return out, nil
}

// LateMark says that the raw bucket starting at Bucket of a series holds
// points in TableLate, or, with Rewrite, that its raw partitions were
// written to after the fact (an import of history). The mark expires at
// Bucket + Retention.
type LateMark struct {
	Series    string
	Bucket    int64
	Retention int64
	Rewrite   bool
}

// LateBucket is a marked raw bucket and the versions of its marks.
type LateBucket struct {
	Bucket int64
	// Version, when not 0, says the bucket has a late partition. It
	// changes every time the bucket is marked late again, never returning
	// to an earlier value. Writers mark a bucket once more after its late
	// rows are durable, so a read of the late partition made after seeing
	// version v holds every late row written before the bucket was last
	// marked with v: it stays current for as long as the version does,
	// which is what lets late partitions be cached.
	Version int64
	// Rewritten, when not 0, is the version of the bucket's last rewrite
	// mark, given after points were written into its raw partitions after
	// the fact: a read of the bucket made after seeing it holds those
	// points, so a cache of whole buckets keys on it. Independent of
	// Version; both follow the same rules.
	Rewritten int64
}

// LateIndex records which raw buckets hold late points, so that reads merge
// the late table in only where it has something.
type LateIndex interface {
	// MarkLate records the marks (no read) and gives each marked bucket a
	// new version, or a new rewrite version for marks with Rewrite.
	MarkLate(ctx context.Context, marks []LateMark) error
	// LateBuckets returns the marked buckets b of the series with
	// span.From <= b < span.To, ascending, each with its current versions.
	LateBuckets(ctx context.Context, series string, span Span) ([]LateBucket, error)
}

// LateIndexBatch is a late index that reads the marks of many series at
// once.
type LateIndexBatch interface {
	// LateBucketsOf returns, by series, what LateBuckets returns for each
	// of the series over span; series without marks may be absent.
	LateBucketsOf(ctx context.Context, series []string, span Span) (map[string][]LateBucket, error)
}

// DirtyWindow names a window of the finest rollup tier, [Window,
// Window+step), of a series whose raw points changed.
type DirtyWindow struct {
	Series string
	Window int64
}

// RollupLog is the log of changed windows that drives rollups. Entries are
// filed under a slot, the start of the write-time interval in which they were
// recorded, so ingest appends without reading and the rollup worker consumes
// slot after slot; nothing is ever deleted, entries expire.
type RollupLog interface {
	// MarkDirty files the windows under slot (idempotent). Entries expire
	// after retention.
	MarkDirty(ctx context.Context, slot, retention int64, windows []DirtyWindow) error
	// DirtyWindows returns the windows filed under slot, each once, in no
	// particular order.
	DirtyWindows(ctx context.Context, slot int64) ([]DirtyWindow, error)
	// OldestDirtySlot returns the smallest slot MarkDirty was ever called
	// with, or false when it never was. Stores keep it without reading.
	OldestDirtySlot(ctx context.Context) (int64, bool, error)
	// Checkpoint returns the named checkpoint, or false when it was never
	// set.
	Checkpoint(ctx context.Context, name string) (int64, bool, error)
	// AdvanceCheckpoint sets the named checkpoint to the largest value it
	// was ever advanced to, so concurrent workers never move it back.
	AdvanceCheckpoint(ctx context.Context, name string, to int64) error
}

// Secrets keeps small values that every gateway instance sharing the store
// must agree on, such as the key that signs cursors.
type Secrets interface {
	// Secret returns the named secret, creating it with generate when it
	// does not exist. When instances race, all of them get the value that
	// was stored first.
	Secret(ctx context.Context, name string, generate func() ([]byte, error)) ([]byte, error)
}

// Store is everything the gateway needs from a storage backend.
type Store interface {
	PartitionReader
	PartitionWriter
	Registry
	RegistryBatch
	LateIndex
	LateIndexBatch
	RollupLog
	Secrets
	Blocks
	LabelIndex
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close flushes and releases the store.
	Close() error
}
