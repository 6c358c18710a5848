// Package storetest is the conformance suite every tiers.Store must pass.
// The embedded store runs it in its unit tests and the Cassandra store in
// the integration tests, against a real node, so that everything above the
// storage interface behaves identically on both.
//
// The suite shares one store between its tests and isolates them by series
// ids that start with a per-run random prefix, because creating a Cassandra
// schema per test would dominate the run time.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// StartEnv names the environment variable that sets Start: an RFC 3339
// instant, so that the suites can be run as if it were any time of day
// (just before midnight, on an hour boundary).
const StartEnv = "TSGATE_TEST_NOW"

// defaultStart is Start when StartEnv is not set: a fixed instant, inside
// its hour, day and month rather than on a boundary.
var defaultStart = time.Date(2026, time.January, 15, 14, 37, 22, 123_000_000, time.UTC)

// Start is the instant the test suites' clocks start at: StartEnv's
// instant when set, else a fixed one, so that no test depends on the wall
// clock or the time of day. A store under test keeps time by it too
// (embedded.Options.Now, cassandra.Config.Now): expiry is decided against
// the clock the data was placed by. An unparsable StartEnv panics: a run
// at an instant other than the one asked for would prove nothing.
func Start() time.Time {
	v, ok := os.LookupEnv(StartEnv)
	if !ok || v == "" {
		return defaultStart
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", StartEnv, v, err))
	}
	return t.UTC()
}

// now is the clock the suite writes against (Start): rows are
// timestamped around it, and the store under test keeps time by it.
func now() int64 { return Start().UnixMilli() }

// Run runs the conformance suite against store, which holds the tables of
// pyramid p and keeps time by Start.
func Run(t *testing.T, store tiers.Store, p tiers.Pyramid) {
	prefix := fmt.Sprintf("conf%08x.", rand.Uint32())
	s := suite{store: store, prefix: prefix, pyramid: p}
	t.Run("ReadEqualsBruteForce", s.readEqualsBruteForce)
	t.Run("EventBucketsReadTogether", s.eventBucketsReadTogether)
	t.Run("RollupPartitionsReadInBatch", s.rollupPartitionsReadInBatch)
	t.Run("ReadsAcrossSeries", s.readsAcrossSeries)
	t.Run("Overwrite", s.overwrite)
	t.Run("ExtrasRoundTrip", s.extrasRoundTrip)
	t.Run("PartitionsAreIsolated", s.partitionsAreIsolated)
	t.Run("EventBucketsOnlyInRaw", s.eventBucketsOnlyInRaw)
	t.Run("WidePartitionPaging", s.widePartitionPaging)
	t.Run("ExpiredRowsAreNotStored", s.expiredRowsAreNotStored)
	t.Run("ReadHonoursContext", s.readHonoursContext)
	t.Run("RegistryWidensWithoutReading", s.registryWidens)
	t.Run("Generations", s.generations)
	t.Run("ListSeries", s.listSeries)
	t.Run("Layout", s.layout)
	t.Run("LookupManySeries", s.lookupManySeries)
	t.Run("LateIndex", s.lateIndex)
	t.Run("LateIndexOfManySeries", s.lateIndexOfManySeries)
	t.Run("RollupLog", s.rollupLog)
	t.Run("Secret", s.secret)
	t.Run("Blocks", s.blocks)
	t.Run("LabelsEqualBruteForce", s.labelsEqualBruteForce)
	t.Run("LabelPostingsSpanEveryShard", s.labelPostingsSpanEveryShard)
	t.Run("LabelsConcurrently", s.labelsConcurrently)
	t.Run("LabelsRefusedAndAbsent", s.labelsRefusedAndAbsent)
	t.Run("SealedEqualsBruteForce", s.sealedEqualsBruteForce)
	t.Run("SealedRollupsEqualBruteForce", s.sealedRollupsEqualBruteForce)
	t.Run("Ping", func(t *testing.T) {
		if err := store.Ping(context.Background()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}

// FiveTiers is a pyramid other than the default, for running the suites on
// a configured pyramid: a 10s tier under the minute tier, and every tier
// keeping its default elsewhere.
func FiveTiers() tiers.Pyramid {
	d := tiers.DefaultPyramid()
	p := tiers.Pyramid{d[0], tiers.NewRollupTier("10s", 10*tiers.Second, 6*tiers.Hour, 14*tiers.Day, tiers.Day), d[1], d[2], d[3]}
	p[0].AutoMax = tiers.Hour
	p.Renumber()
	return p
}

type suite struct {
	store   tiers.Store
	prefix  string
	pyramid tiers.Pyramid
}

func (s suite) series(name string) string { return s.prefix + name }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// ReadAll drains a partition read.
func ReadAll(pages tiers.RowPages) ([]tiers.Row, int, error) {
	defer pages.Close()
	var rows []tiers.Row
	n := 0
	for {
		page, err := pages.Next()
		if errors.Is(err, tiers.ErrDone) {
			return rows, n, nil
		}
		if err != nil {
			return rows, n, err
		}
		if len(page) == 0 {
			return rows, n, errors.New("an empty page without ErrDone")
		}
		n++
		rows = append(rows, page...)
	}
}

func (s suite) read(t *testing.T, req tiers.ReadRequest) []tiers.Row {
	t.Helper()
	rows, _, err := ReadAll(s.store.Read(ctx(t), req))
	if err != nil {
		t.Fatalf("read %+v: %v", req, err)
	}
	return rows
}

func (s suite) write(t *testing.T, writes ...tiers.PartitionWrite) {
	t.Helper()
	if err := s.store.Write(ctx(t), writes); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// bruteForce filters and orders rows as a read of span should return them.
func bruteForce(rows []tiers.Row, span tiers.Span, desc bool) []tiers.Row {
	var out []tiers.Row
	for _, r := range rows {
		if span.Contains(r.T) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b tiers.Row) int {
		if desc {
			return int(b.T - a.T)
		}
		return int(a.T - b.T)
	})
	return out
}

func randomRow(r *rand.Rand, t int64, raw bool) tiers.Row {
	v := (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(12)-4))
	if raw {
		return tiers.PointRow(t, v)
	}
	mn, mx := v, v+r.Float64()*100
	return tiers.Row{T: t, Min: mn, Max: mx, Sum: (mn + mx) * 3, Count: 1 + r.Int64N(1<<40)}
}

func (s suite) readEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	base := tiers.AlignDown(now(), tiers.Hour) - tiers.Hour
	for i, table := range s.pyramid.Tables() {
		eb := 0
		if table == tiers.TableRaw {
			eb = 2
		}
		key := tiers.PartitionKey{Table: table, Series: s.series(fmt.Sprintf("bf%d", i)), Bucket: base, EventBucket: eb}
		// Irregular timestamps, including ones a millisecond apart.
		var rows []tiers.Row
		seen := map[int64]bool{}
		for range 300 {
			ts := base + r.Int64N(tiers.Hour)
			if seen[ts] {
				continue
			}
			seen[ts] = true
			rows = append(rows, randomRow(r, ts, table == tiers.TableRaw || table == tiers.TableLate))
		}
		s.write(t, tiers.PartitionWrite{Key: key, Retention: 30 * tiers.Day, Rows: rows})
		for range 20 {
			a, b := base+r.Int64N(tiers.Hour+2), base+r.Int64N(tiers.Hour+2)
			span := tiers.Span{From: min(a, b), To: max(a, b) + 1}
			for _, desc := range []bool{false, true} {
				pageSize := []int{1, 7, 100, 5000}[r.IntN(4)]
				got := s.read(t, tiers.ReadRequest{Key: key, Span: span, Desc: desc, PageSize: pageSize})
				want := bruteForce(rows, span, desc)
				if !equalRows(got, want) {
					t.Fatalf("%s span %+v desc %v page %d: got %d rows, want %d\n got %v\nwant %v",
						table, span, desc, pageSize, len(got), len(want), head(got), head(want))
				}
			}
		}
	}
}

// The reads of a bucket's event buckets made together (ReadRequest.
// Together), which a store may answer with one query, each return what
// it returns alone: whatever each event bucket holds against the page
// size (nothing, less than a page, a page exactly, several), whichever
// of them are read, in a bucket that has ended and in one that ends after
// now; and a second read of an event bucket under the same Together too.
func (s suite) eventBucketsReadTogether(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const n = 4
	for bi, base := range []int64{tiers.AlignDown(now(), tiers.Hour), tiers.AlignDown(now(), tiers.Hour) - 3*tiers.Hour} {
		for round := range 6 {
			pageSize := []int{1, 3, 7, 50}[r.IntN(4)]
			series := s.series(fmt.Sprintf("together%d.%d", bi, round))
			rows := make([][]tiers.Row, n)
			for eb := range n {
				count := []int{0, pageSize - 1, pageSize, pageSize + 1, 3*pageSize + r.IntN(pageSize+1)}[r.IntN(5)]
				seen := map[int64]bool{}
				for len(rows[eb]) < count {
					ts := base + r.Int64N(tiers.Hour)
					if !seen[ts] {
						seen[ts] = true
						rows[eb] = append(rows[eb], randomRow(r, ts, true))
					}
				}
				if len(rows[eb]) > 0 {
					s.write(t, tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: base, EventBucket: eb}, Retention: 30 * tiers.Day, Rows: rows[eb]})
				}
			}
			for range 8 {
				span := tiers.Span{From: base, To: base + tiers.Hour}
				if r.IntN(2) == 0 {
					a, b := base+r.Int64N(tiers.Hour+2), base+r.Int64N(tiers.Hour+2)
					span = tiers.Span{From: min(a, b), To: max(a, b) + 1}
				}
				ebs := someOf(r, n)
				together := &tiers.BucketReads{EventBuckets: n}
				reqs := make([]tiers.ReadRequest, len(ebs))
				for i, eb := range ebs {
					reqs[i] = tiers.ReadRequest{
						Key:  tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: base, EventBucket: eb},
						Span: span, PageSize: pageSize, End: base + tiers.Hour, Together: together,
					}
				}
				got, errs := s.readAtOnce(t, reqs)
				for i, eb := range ebs {
					if errs[i] != nil {
						t.Fatalf("event bucket %d of %v, page %d: %v", eb, ebs, pageSize, errs[i])
					}
					if want := bruteForce(rows[eb], span, false); !equalRows(got[i], want) {
						t.Fatalf("event bucket %d of %v (holding %d rows), span %+v, page %d: got %d rows, want %d\n got %v\nwant %v",
							eb, ebs, len(rows[eb]), span, pageSize, len(got[i]), len(want), head(got[i]), head(want))
					}
				}
			}
		}
	}
}

// The reads of one bucket's partitions for many series made under one
// SeriesReads (ReadRequest.Across), which a store may answer with one
// query, each return what they return alone, for a rollup bucket and a
// raw bucket of event buckets: whatever each partition holds against the
// page size (nothing, less than a page, a page exactly, several),
// whichever partitions are read, with series the reads share that are
// not read, a read of a series they do not list, reads of other spans
// and a second read of a partition; and reads shared by a hundred series,
// too many for a store to hold a whole page of each.
func (s suite) readsAcrossSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	rollup := s.pyramid.Tier(s.pyramid.Rollups()[0])
	for _, c := range []struct {
		table        tiers.Table
		width, step  int64
		eventBuckets int
	}{
		{rollup.Table, rollup.BucketWidth, rollup.Step, 1},
		{tiers.TableRaw, tiers.Hour, 10 * tiers.Second, 4},
	} {
		bucket := tiers.AlignDown(now(), c.width)
		windows := min(300, c.width/c.step)
		const n = 5
		type partition struct{ series, eb int }
		for round := range 8 {
			pageSize := []int{1, 3, 7, 50}[r.IntN(4)]
			keys := map[partition]tiers.PartitionKey{}
			rows := map[partition][]tiers.Row{}
			var all []partition
			for i := range n {
				for eb := range c.eventBuckets {
					p := partition{i, eb}
					all = append(all, p)
					keys[p] = tiers.PartitionKey{Table: c.table, Series: s.series(fmt.Sprintf("across%s%d.%d", c.table, round, i)), Bucket: bucket, EventBucket: eb}
					count := int64([]int{0, pageSize - 1, pageSize, pageSize + 1, 3*pageSize + r.IntN(pageSize+1)}[r.IntN(5)])
					for w := range min(count, windows) {
						row := tiers.Row{T: bucket + w*c.step + int64(eb), Min: float64(w), Max: float64(w) + float64(i), Sum: float64(r.IntN(1000)) / 8, Count: 1 + r.Int64N(9)}
						if c.table == tiers.TableRaw {
							row = tiers.PointRow(row.T, row.Sum)
						}
						rows[p] = append(rows[p], row)
					}
					if len(rows[p]) > 0 {
						s.write(t, tiers.PartitionWrite{Key: keys[p], Retention: 30 * tiers.Day, Rows: rows[p]})
					}
				}
			}
			for range 6 {
				across := &tiers.SeriesReads{EventBuckets: c.eventBuckets}
				for i := range n - 1 {
					if r.IntN(4) != 0 {
						across.Series = append(across.Series, keys[partition{i, 0}].Series)
					}
				}
				var reads []partition
				for _, i := range someOf(r, len(all)) {
					reads = append(reads, all[i])
				}
				shared := tiers.Span{From: bucket, To: bucket + c.width}
				if r.IntN(2) == 0 {
					shared = tiers.Span{From: bucket + r.Int64N(3)*c.step, To: bucket + (3+r.Int64N(windows))*c.step}
				}
				reqs := make([]tiers.ReadRequest, len(reads))
				for j, p := range reads {
					span := shared
					if r.IntN(5) == 0 {
						span.From += c.step
					}
					reqs[j] = tiers.ReadRequest{Key: keys[p], Span: span, PageSize: pageSize, End: bucket + c.width, Across: across}
				}
				got, errs := s.readAtOnce(t, reqs)
				for j, p := range reads {
					if errs[j] != nil {
						t.Fatalf("%s: %+v of %v, page %d: %v", c.table, p, across.Series, pageSize, errs[j])
					}
					if want := bruteForce(rows[p], reqs[j].Span, false); !equalRows(got[j], want) {
						t.Fatalf("%s: %+v (holding %d rows) under %v, span %+v, page %d: got %d rows, want %d\n got %v\nwant %v",
							c.table, p, len(rows[p]), across.Series, reqs[j].Span, pageSize, len(got[j]), len(want), head(got[j]), head(want))
					}
				}
			}
		}
	}
	// A hundred series of four event buckets, three of them holding more
	// rows than a four-hundredth of what a store may hold for such a
	// read, read at the scan's page size.
	bucket := tiers.AlignDown(now(), tiers.Hour)
	across := &tiers.SeriesReads{EventBuckets: 4}
	for i := range 100 {
		across.Series = append(across.Series, s.series(fmt.Sprintf("acrosswide.%02d", i)))
	}
	wide := make([][]tiers.Row, 4)
	reqs := make([]tiers.ReadRequest, 4)
	for i := range wide {
		key := tiers.PartitionKey{Table: tiers.TableRaw, Series: across.Series[i*7], Bucket: bucket, EventBucket: i}
		for j := range []int{450, 700, 1200, 0}[i] {
			wide[i] = append(wide[i], tiers.PointRow(bucket+int64(j)*tiers.Second, float64(j*i)))
		}
		if len(wide[i]) > 0 {
			s.write(t, tiers.PartitionWrite{Key: key, Retention: 30 * tiers.Day, Rows: wide[i]})
		}
		reqs[i] = tiers.ReadRequest{Key: key, Span: tiers.Span{From: bucket, To: bucket + tiers.Hour}, PageSize: 5000, End: bucket + tiers.Hour, Across: across}
	}
	got, errs := s.readAtOnce(t, reqs)
	for i := range reqs {
		if errs[i] != nil || !equalRows(got[i], wide[i]) {
			t.Fatalf("a read shared by 100 series, partition holding %d rows: got %d rows, %v", len(wide[i]), len(got[i]), errs[i])
		}
	}
}

// someOf returns some of 0..n-1 in order, each with odds of 3 in 4, and
// now and then one of them again at the end: reads a store may answer
// together must also serve a partition read twice.
func someOf(r *rand.Rand, n int) []int {
	var out []int
	for i := range n {
		if r.IntN(4) != 0 {
			out = append(out, i)
		}
	}
	if len(out) > 0 && r.IntN(3) == 0 {
		out = append(out, out[r.IntN(len(out))])
	}
	return out
}

// readAtOnce makes the reads at once, as a scan does, and returns each
// one's rows and error.
func (s suite) readAtOnce(t *testing.T, reqs []tiers.ReadRequest) ([][]tiers.Row, []error) {
	got := make([][]tiers.Row, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { got[i], _, errs[i] = ReadAll(s.store.Read(ctx(t), reqs[i])) })
	}
	wg.Wait()
	return got, errs
}

func equalRows(a, b []tiers.Row) bool {
	return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b))
}

func head(rows []tiers.Row) []tiers.Row { return rows[:min(len(rows), 5)] }

func (s suite) overwrite(t *testing.T) {
	base := tiers.AlignDown(now(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("ow"), Bucket: base, EventBucket: 3}
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Day, Rows: []tiers.Row{
		tiers.PointRow(base+1, 1), tiers.PointRow(base+2, 2),
	}})
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Day, Rows: []tiers.Row{
		tiers.PointRow(base+2, 20), tiers.PointRow(base+3, 3),
	}})
	got := s.read(t, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 100})
	want := []tiers.Row{tiers.PointRow(base+1, 1), tiers.PointRow(base+2, 20), tiers.PointRow(base+3, 3)}
	if !slices.Equal(got, want) {
		t.Fatalf("after overwrite got %v, want %v", got, want)
	}
}

// Rows with the same T in different series, buckets, event buckets or
// tables never see each other.
func (s suite) partitionsAreIsolated(t *testing.T) {
	base := tiers.AlignDown(now(), tiers.Hour)
	ts := base + 1234
	keys := []tiers.PartitionKey{
		{Table: tiers.TableRaw, Series: s.series("iso.a"), Bucket: base, EventBucket: 0},
		{Table: tiers.TableRaw, Series: s.series("iso.a"), Bucket: base, EventBucket: 1},
		{Table: tiers.TableRaw, Series: s.series("iso.a"), Bucket: base - tiers.Hour, EventBucket: 0},
		{Table: tiers.TableRaw, Series: s.series("iso.ab"), Bucket: base, EventBucket: 0},
		{Table: tiers.TableRaw, Series: s.series("iso.b"), Bucket: base, EventBucket: 0},
		{Table: tiers.TableLate, Series: s.series("iso.a"), Bucket: base, EventBucket: 0},
	}
	for _, table := range s.pyramid.Tables()[2:] {
		keys = append(keys, tiers.PartitionKey{Table: table, Series: s.series("iso.a"), Bucket: base})
	}
	var writes []tiers.PartitionWrite
	for i, k := range keys {
		writes = append(writes, tiers.PartitionWrite{Key: k, Retention: tiers.Day,
			Rows: []tiers.Row{tiers.PointRow(ts, float64(i))}})
	}
	s.write(t, writes...)
	for i, k := range keys {
		got := s.read(t, tiers.ReadRequest{Key: k, Span: tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, PageSize: 10})
		if want := []tiers.Row{tiers.PointRow(ts, float64(i))}; !slices.Equal(got, want) {
			t.Fatalf("partition %+v: got %v, want %v", k, got, want)
		}
	}
}

// Only points_raw is split into event buckets: a key of another table with
// an event bucket other than 0 is an error on every store, for writes and
// reads alike, rather than silently meaning event bucket 0.
func (s suite) eventBucketsOnlyInRaw(t *testing.T) {
	base := tiers.AlignDown(now(), tiers.Hour)
	for _, table := range s.pyramid.Tables()[1:] {
		key := tiers.PartitionKey{Table: table, Series: s.series("eb"), Bucket: base, EventBucket: 3}
		err := s.store.Write(ctx(t), []tiers.PartitionWrite{{Key: key, Retention: tiers.Day, Rows: []tiers.Row{tiers.PointRow(base+1, 7)}}})
		if err == nil {
			t.Errorf("%s: a write to event bucket 3 was accepted", table)
		}
		if _, _, err := ReadAll(s.store.Read(ctx(t), tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + 2}})); err == nil {
			t.Errorf("%s: a read of event bucket 3 was accepted", table)
		}
		zero := key
		zero.EventBucket = 0
		if got := s.read(t, tiers.ReadRequest{Key: zero, Span: tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}}); len(got) != 0 {
			t.Errorf("%s: the refused write left rows %v", table, got)
		}
	}
	raw := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("eb"), Bucket: base, EventBucket: tiers.MaxEventBuckets}
	if err := s.store.Write(ctx(t), []tiers.PartitionWrite{{Key: raw, Retention: tiers.Day, Rows: []tiers.Row{tiers.PointRow(base+1, 7)}}}); err == nil {
		t.Errorf("a raw write to event bucket %d was accepted", tiers.MaxEventBuckets)
	}
}

func (s suite) widePartitionPaging(t *testing.T) {
	base := tiers.AlignDown(now(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("wide"), Bucket: base}
	rows := make([]tiers.Row, 12345)
	for i := range rows {
		rows[i] = tiers.PointRow(base+int64(i)*250, float64(i))
	}
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Day, Rows: rows})
	for _, desc := range []bool{false, true} {
		pages := s.store.Read(ctx(t), tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, Desc: desc, PageSize: 1000})
		got, n, err := ReadAll(pages)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteForce(rows, tiers.Span{From: base, To: base + tiers.Hour}, desc)
		if !equalRows(got, want) {
			t.Fatalf("desc %v: got %d rows, want %d", desc, len(got), len(want))
		}
		if n < 13 || n > 14 {
			t.Fatalf("desc %v: %d rows came in %d pages of at most 1000", desc, len(got), n)
		}
	}
	// Reading from a position inside the partition starts there.
	from := base + 10000*250
	got := s.read(t, tiers.ReadRequest{Key: key, Span: tiers.Span{From: from, To: base + tiers.Hour}, PageSize: 1000})
	if len(got) != 2345 || got[0].T != from {
		t.Fatalf("read from position: %d rows starting at %v", len(got), head(got))
	}
}

func (s suite) expiredRowsAreNotStored(t *testing.T) {
	n := now()
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("exp"), Bucket: tiers.AlignDown(n-2*tiers.Day, tiers.Hour)}
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Day, Rows: []tiers.Row{
		tiers.PointRow(key.Bucket+5, 1),
	}})
	keep := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("exp"), Bucket: key.Bucket}
	s.write(t, tiers.PartitionWrite{Key: keep, Retention: 7 * tiers.Day, Rows: []tiers.Row{
		tiers.PointRow(key.Bucket+6, 2),
	}})
	got := s.read(t, tiers.ReadRequest{Key: key, Span: tiers.Span{From: key.Bucket, To: key.Bucket + tiers.Hour}, PageSize: 10})
	if want := []tiers.Row{tiers.PointRow(key.Bucket+6, 2)}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want only the row whose retention has not passed: %v", got, want)
	}
}

func (s suite) readHonoursContext(t *testing.T) {
	base := tiers.AlignDown(now(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.series("ctx"), Bucket: base}
	rows := make([]tiers.Row, 3000)
	for i := range rows {
		rows[i] = tiers.PointRow(base+int64(i), 1)
	}
	s.write(t, tiers.PartitionWrite{Key: key, Retention: tiers.Day, Rows: rows})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := ReadAll(s.store.Read(c, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 100}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: err = %v, want context.Canceled", err)
	}
}

// generations: MarkRewritten gives a series a new generation each time,
// never 0 nor one seen before, leaves other series alone, and creates no
// series.
func (s suite) generations(t *testing.T) {
	a, b, ghost := s.series("gen.a"), s.series("gen.b"), s.series("gen.ghost")
	if err := s.store.NoteSeries(ctx(t), []tiers.SeriesInfo{{ID: a, First: 10, Last: 20}, {ID: b, First: 10, Last: 20}}); err != nil {
		t.Fatal(err)
	}
	gen := func(id string) int64 {
		t.Helper()
		info, err := s.store.LookupSeries(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.First != 10 || info.Last != 20 {
			t.Fatalf("series %s spans [%d, %d] after generations were marked, want [10, 20]", id, info.First, info.Last)
		}
		return info.Generation
	}
	if g := gen(a); g != 0 {
		t.Fatalf("a series never rewritten has generation %d", g)
	}
	seen := map[int64]bool{}
	for i := range 4 {
		bBefore := gen(b)
		if err := s.store.MarkRewritten(ctx(t), []string{a, ghost}); err != nil {
			t.Fatal(err)
		}
		g := gen(a)
		if g == 0 || seen[g] {
			t.Fatalf("mark %d: generation %d, seen before or 0", i, g)
		}
		seen[g] = true
		if gen(b) != bBefore {
			t.Fatal("marking one series changed another's generation")
		}
	}
	if _, err := s.store.LookupSeries(ctx(t), ghost); !errors.Is(err, tiers.ErrNotFound) {
		t.Fatalf("a series only marked rewritten: %v, want not found", err)
	}
	listed, err := s.store.ListSeries(ctx(t), s.prefix+"gen.", "", 10)
	if err != nil || len(listed) != 2 || listed[0].ID != a || listed[1].ID != b {
		t.Fatalf("ListSeries after generations were marked: %v, %v; want %s and %s only", listed, err, a, b)
	}
}

func (s suite) registryWidens(t *testing.T) {
	id := s.series("reg.widen")
	if _, err := s.store.LookupSeries(ctx(t), id); !errors.Is(err, tiers.ErrNotFound) {
		t.Fatalf("unknown series: err = %v, want ErrNotFound", err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	n := now()
	for range 40 {
		a, b := n-r.Int64N(tiers.Week), n-r.Int64N(tiers.Week)
		lo, hi := min(a, b), max(a, b)
		first, last = min(first, lo), max(last, hi)
		wg.Go(func() {
			if err := s.store.NoteSeries(ctx(t), []tiers.SeriesInfo{{ID: id, First: lo, Last: hi}}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := s.store.LookupSeries(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.First != first || got.Last != last {
		t.Fatalf("after concurrent widening got %+v, want first %d last %d", got, first, last)
	}
	if got.Layout != nil {
		t.Fatalf("a series without its own layout reported %+v", got.Layout)
	}
}

func (s suite) listSeries(t *testing.T) {
	base := s.series("list.")
	var ids []string
	for i := range 57 {
		ids = append(ids, fmt.Sprintf("%s%c%d", base, "abc"[i%3], i))
	}
	ids = append(ids, base+"a", base+"a.b", base+"a:b", base+"a-b", base+"a_b", base+"Z")
	var infos []tiers.SeriesInfo
	n := now()
	for i, id := range ids {
		infos = append(infos, tiers.SeriesInfo{ID: id, First: n - int64(i), Last: n + int64(i)})
	}
	if err := s.store.NoteSeries(ctx(t), infos); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	for _, prefix := range []string{base, base + "a", base + "b1", base + "zz"} {
		var exp []string
		for _, id := range want {
			if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
				exp = append(exp, id)
			}
		}
		// Page through with several page sizes.
		for _, limit := range []int{1, 5, 1000} {
			var got []string
			after := ""
			for range 200 {
				page, err := s.store.ListSeries(ctx(t), prefix, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("ListSeries returned %d > limit %d", len(page), limit)
				}
				for _, p := range page {
					got = append(got, p.ID)
					i := slices.Index(ids, p.ID)
					if p.First != n-int64(i) || p.Last != n+int64(i) {
						t.Fatalf("series %s listed with %d..%d", p.ID, p.First, p.Last)
					}
				}
				if len(page) < limit {
					break
				}
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, exp) {
				t.Fatalf("prefix %q limit %d:\n got %v\nwant %v", prefix, limit, got, exp)
			}
		}
	}
}

func (s suite) layout(t *testing.T) {
	id := s.series("layout")
	n := now()
	if err := s.store.NoteSeries(ctx(t), []tiers.SeriesInfo{{ID: id, First: n, Last: n}}); err != nil {
		t.Fatal(err)
	}
	entries := []tiers.LayoutEntry{
		{Since: 0, Width: tiers.Hour, EventBuckets: 4},
		{Since: tiers.AlignUp(n, tiers.Hour) + tiers.Hour, Width: 15 * tiers.Minute, EventBuckets: 8},
	}
	for _, e := range entries {
		if err := s.store.AppendLayout(ctx(t), id, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.store.LookupSeries(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Layout, tiers.Layout(entries)) {
		t.Fatalf("layout = %+v, want %+v", got.Layout, entries)
	}
}

// Many series looked up at once are what looking each up gives: spans,
// generations, labels, layouts; the ids the registry lacks, labelled
// ones among them, are absent.
func (s suite) lookupManySeries(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 29))
	n := now()
	var ids []string
	for i := range 150 {
		id := s.series(fmt.Sprintf("many%03d", i))
		ids = append(ids, id)
		switch i % 5 {
		case 0:
			continue // never written
		case 1:
			// Names of this run's own: other suites share the store and
			// select by label.
			if err := s.store.SetLabels(ctx(t), id, tiers.Labels{s.labelName("many_job"): "api", s.labelName("many_i"): fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				continue // labelled, never written
			}
		}
		first := n - r.Int64N(tiers.Day)
		if err := s.store.NoteSeries(ctx(t), []tiers.SeriesInfo{{ID: id, First: first, Last: first + r.Int64N(tiers.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := s.store.MarkRewritten(ctx(t), []string{id}); err != nil {
				t.Fatal(err)
			}
		}
		if i%4 == 0 {
			for k := range 1 + r.IntN(2) {
				e := tiers.LayoutEntry{Since: tiers.AlignUp(n, tiers.Hour) + int64(k+1)*tiers.Hour, Width: 15 * tiers.Minute, EventBuckets: 2 + k}
				if err := s.store.AppendLayout(ctx(t), id, e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	ask := append(slices.Clone(ids), s.series("many.ghost"), "bad\xff", ids[3])
	got, err := s.store.LookupSeriesOf(ctx(t), ask)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ask {
		want, err := s.store.LookupSeries(ctx(t), id)
		g, found := got[id]
		switch {
		case errors.Is(err, tiers.ErrNotFound):
			if found {
				t.Fatalf("LookupSeriesOf found %s, which LookupSeries does not: %+v", id, g)
			}
		case err != nil:
			t.Fatal(err)
		case !found:
			t.Fatalf("LookupSeriesOf lacks %s, which LookupSeries finds: %+v", id, want)
		case g.First != want.First || g.Last != want.Last || g.Generation != want.Generation ||
			!maps.Equal(g.Labels, want.Labels) || !slices.Equal(g.Layout, want.Layout):
			t.Fatalf("series %s: LookupSeriesOf gives %+v, LookupSeries %+v", id, g, want)
		}
	}
	if len(got) == 0 {
		t.Fatal("LookupSeriesOf found none of the series")
	}
}

// The late index of many series read at once is what reading each
// series gives: late and rewrite marks, series with none, any span.
func (s suite) lateIndexOfManySeries(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	base := tiers.AlignDown(now(), tiers.Hour) - 48*tiers.Hour
	var ids []string
	var marks []tiers.LateMark
	for i := range 130 {
		id := s.series(fmt.Sprintf("latemany%03d", i))
		ids = append(ids, id)
		for range r.IntN(4) {
			marks = append(marks, tiers.LateMark{Series: id, Bucket: base + r.Int64N(48)*tiers.Hour, Retention: tiers.Week, Rewrite: r.IntN(3) == 0})
		}
	}
	if err := s.store.MarkLate(ctx(t), marks); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		a, b := base-tiers.Hour+r.Int64N(50*tiers.Hour), base-tiers.Hour+r.Int64N(50*tiers.Hour)
		span := tiers.Span{From: min(a, b), To: max(a, b) + 1}
		ask := slices.Clone(ids)
		r.Shuffle(len(ask), func(i, j int) { ask[i], ask[j] = ask[j], ask[i] })
		ask = ask[:1+r.IntN(len(ask))]
		got, err := s.store.LateBucketsOf(ctx(t), ask, span)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ask {
			want, err := s.store.LateBuckets(ctx(t), id, span)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[id], want) {
				t.Fatalf("span %+v, series %s: LateBucketsOf gives %v, LateBuckets %v", span, id, got[id], want)
			}
		}
		for id := range got {
			if !slices.Contains(ask, id) {
				t.Fatalf("LateBucketsOf answered for %s, which it was not asked for", id)
			}
		}
	}
}

func (s suite) lateIndex(t *testing.T) {
	id := s.series("late")
	base := tiers.AlignDown(now(), tiers.Hour) - 10*tiers.Hour
	marks := []tiers.LateMark{
		{Series: id, Bucket: base + 3*tiers.Hour, Retention: tiers.Week},
		{Series: id, Bucket: base, Retention: tiers.Week},
		{Series: id, Bucket: base + 3*tiers.Hour, Retention: tiers.Week},
		{Series: id + "x", Bucket: base + tiers.Hour, Retention: tiers.Week},
		{Series: id, Bucket: base - 30*tiers.Day, Retention: tiers.Week}, // already expired
	}
	if err := s.store.MarkLate(ctx(t), marks); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		span tiers.Span
		want []int64
	}{
		{tiers.Span{From: base - 60*tiers.Day, To: base + tiers.Day}, []int64{base, base + 3*tiers.Hour}},
		{tiers.Span{From: base, To: base + 3*tiers.Hour}, []int64{base}},
		{tiers.Span{From: base + 1, To: base + 3*tiers.Hour + 1}, []int64{base + 3*tiers.Hour}},
		{tiers.Span{From: base + 4*tiers.Hour, To: base + tiers.Day}, nil},
	}
	for _, c := range cases {
		got, err := s.store.LateBuckets(ctx(t), id, c.span)
		if err != nil {
			t.Fatal(err)
		}
		var starts []int64
		for _, b := range got {
			starts = append(starts, b.Bucket)
			if b.Version == 0 {
				t.Fatalf("LateBuckets(%+v): bucket %d has version 0", c.span, b.Bucket)
			}
		}
		if !slices.Equal(starts, c.want) {
			t.Fatalf("LateBuckets(%+v) = %v, want buckets %v", c.span, got, c.want)
		}
	}

	// Every new mark of a bucket changes its version to one never seen
	// before, and leaves the other buckets' versions alone: readers key
	// cached late partitions on it.
	all := tiers.Span{From: base - tiers.Day, To: base + tiers.Day}
	versions := func() map[int64]int64 {
		t.Helper()
		got, err := s.store.LateBuckets(ctx(t), id, all)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]int64{}
		for _, b := range got {
			out[b.Bucket] = b.Version
		}
		return out
	}
	before := versions()
	seen := map[int64]bool{before[base]: true}
	for range 5 {
		if err := s.store.MarkLate(ctx(t), []tiers.LateMark{{Series: id, Bucket: base, Retention: tiers.Week}}); err != nil {
			t.Fatal(err)
		}
		after := versions()
		if seen[after[base]] || after[base] == 0 {
			t.Fatalf("a new mark of bucket %d left it at version %d, seen before", base, after[base])
		}
		seen[after[base]] = true
		if after[base+3*tiers.Hour] != before[base+3*tiers.Hour] {
			t.Fatalf("a mark of bucket %d changed the version of bucket %d", base, base+3*tiers.Hour)
		}
	}

	// Rewrite marks: a bucket rewritten only has no late partition
	// (Version 0); rewrite and late versions move independently, each to a
	// value never seen before; expired rewrite marks are gone.
	marksOf := func() map[int64]tiers.LateBucket {
		t.Helper()
		got, err := s.store.LateBuckets(ctx(t), id, all)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]tiers.LateBucket{}
		for i, b := range got {
			if i > 0 && got[i-1].Bucket >= b.Bucket {
				t.Fatalf("LateBuckets out of order: %v", got)
			}
			out[b.Bucket] = b
		}
		return out
	}
	rewrite := func(bucket, retention int64) {
		t.Helper()
		if err := s.store.MarkLate(ctx(t), []tiers.LateMark{{Series: id, Bucket: bucket, Retention: retention, Rewrite: true}}); err != nil {
			t.Fatal(err)
		}
	}
	only := base + 5*tiers.Hour
	rewrite(only, tiers.Week)
	rewrite(base-30*tiers.Day, tiers.Week) // already expired
	m := marksOf()
	if b := m[only]; b.Version != 0 || b.Rewritten == 0 {
		t.Fatalf("a bucket rewritten only: %+v, want version 0 and a rewrite version", b)
	}
	if _, ok := m[base-30*tiers.Day]; ok {
		t.Fatal("an expired rewrite mark is listed")
	}
	if m[base].Rewritten != 0 {
		t.Fatalf("a bucket marked late only has rewrite version %d", m[base].Rewritten)
	}
	rewriteSeen := map[int64]bool{m[only].Rewritten: true}
	for i := range 4 {
		lateBefore := m[base].Version
		rewrite(base, tiers.Week)
		m = marksOf()
		if m[base].Version != lateBefore || m[base].Rewritten == 0 || rewriteSeen[m[base].Rewritten] {
			t.Fatalf("rewrite %d of bucket %d: %+v (late version before %d)", i, base, m[base], lateBefore)
		}
		rewriteSeen[m[base].Rewritten] = true
		rewrittenBefore := m[base].Rewritten
		if err := s.store.MarkLate(ctx(t), []tiers.LateMark{{Series: id, Bucket: base, Retention: tiers.Week}}); err != nil {
			t.Fatal(err)
		}
		m = marksOf()
		if m[base].Rewritten != rewrittenBefore || seen[m[base].Version] {
			t.Fatalf("late mark %d of a rewritten bucket: %+v (rewrite version before %d)", i, m[base], rewrittenBefore)
		}
		seen[m[base].Version] = true
	}
}

func (s suite) rollupLog(t *testing.T) {
	slot := tiers.AlignDown(now(), tiers.Minute) + int64(rand.IntN(1000))*tiers.Minute
	a, b := s.series("dirty.a"), s.series("dirty.b")
	windows := []tiers.DirtyWindow{{Series: a, Window: slot - tiers.Minute}, {Series: b, Window: slot}, {Series: a, Window: slot - 3*tiers.Day}}
	for range 2 { // idempotent
		if err := s.store.MarkDirty(ctx(t), slot, tiers.Week, windows); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.store.MarkDirty(ctx(t), slot+tiers.Minute, tiers.Week, []tiers.DirtyWindow{{Series: b, Window: slot + tiers.Minute}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.store.DirtyWindows(ctx(t), slot)
	if err != nil {
		t.Fatal(err)
	}
	// Other runs of the suite may share the slot: look only at this run's.
	var mine []tiers.DirtyWindow
	for _, w := range got {
		if w.Series == a || w.Series == b {
			mine = append(mine, w)
		}
	}
	sortWindows(mine)
	want := slices.Clone(windows)
	sortWindows(want)
	if !slices.Equal(mine, want) {
		t.Fatalf("DirtyWindows = %v, want %v", mine, want)
	}
	oldest, ok, err := s.store.OldestDirtySlot(ctx(t))
	if err != nil || !ok || oldest > slot {
		t.Fatalf("OldestDirtySlot = %d, %v, %v; want at most %d", oldest, ok, err, slot)
	}

	name := s.prefix + "checkpoint"
	if _, ok, err := s.store.Checkpoint(ctx(t), name); err != nil || ok {
		t.Fatalf("unset checkpoint: ok=%v err=%v", ok, err)
	}
	var wg sync.WaitGroup
	for _, v := range []int64{5 * tiers.Minute, 9 * tiers.Minute, 2 * tiers.Minute, 7 * tiers.Minute} {
		wg.Go(func() {
			if err := s.store.AdvanceCheckpoint(ctx(t), name, v); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := s.store.AdvanceCheckpoint(ctx(t), name, 3*tiers.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.store.Checkpoint(ctx(t), name); err != nil || !ok || v != 9*tiers.Minute {
		t.Fatalf("checkpoint = %d, %v, %v; want the largest advance %d", v, ok, err, 9*tiers.Minute)
	}
}

func sortWindows(w []tiers.DirtyWindow) {
	slices.SortFunc(w, func(x, y tiers.DirtyWindow) int {
		if x.Series != y.Series {
			if x.Series < y.Series {
				return -1
			}
			return 1
		}
		return int(x.Window - y.Window)
	})
}

func (s suite) secret(t *testing.T) {
	name := s.prefix + "secret"
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			v, err := s.store.Secret(ctx(t), name, func() ([]byte, error) {
				return []byte(fmt.Sprintf("value-%d", i)), nil
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for _, v := range got {
		if len(v) == 0 || !bytes.Equal(v, got[0]) {
			t.Fatalf("racing callers got different secrets: %q", got)
		}
	}
	again, err := s.store.Secret(ctx(t), name, func() ([]byte, error) { return []byte("other"), nil })
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("second call got %q, %v; want the stored %q", again, err, got[0])
	}
}

// blocks checks the blocked list against a model through random blocks,
// re-blocks and unblocks, reading it back whole and one series at a time.
func (s suite) blocks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = s.series(fmt.Sprintf("blocked%d", i))
	}
	model := map[string]tiers.BlockedSeries{}
	check := func(step int) {
		t.Helper()
		list, err := s.store.ListBlocked(ctx(t))
		if err != nil {
			t.Fatalf("step %d: ListBlocked: %v", step, err)
		}
		var got []tiers.BlockedSeries
		for _, b := range list {
			if len(b.Series) >= len(s.prefix) && b.Series[:len(s.prefix)] == s.prefix {
				got = append(got, b)
			}
		}
		var want []tiers.BlockedSeries
		for _, b := range model {
			want = append(want, b)
		}
		slices.SortFunc(want, func(a, b tiers.BlockedSeries) int { return cmpString(a.Series, b.Series) })
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: ListBlocked = %+v, want %+v", step, got, want)
		}
		for _, id := range ids {
			b, ok, err := s.store.IsBlocked(ctx(t), id)
			if err != nil {
				t.Fatalf("step %d: IsBlocked(%s): %v", step, id, err)
			}
			w, wok := model[id]
			if ok != wok || b != w {
				t.Fatalf("step %d: IsBlocked(%s) = %+v %v, want %+v %v", step, id, b, ok, w, wok)
			}
		}
	}
	check(0)
	for step := 1; step <= 30; step++ {
		id := ids[r.IntN(len(ids))]
		if r.IntN(3) == 0 {
			if err := s.store.Unblock(ctx(t), id); err != nil {
				t.Fatalf("Unblock: %v", err)
			}
			delete(model, id)
		} else {
			b := tiers.BlockedSeries{Series: id, Reason: fmt.Sprintf("reason %d: ünïcode, quotes ' \"", step), Since: now() + int64(step)}
			if err := s.store.Block(ctx(t), b); err != nil {
				t.Fatalf("Block: %v", err)
			}
			model[id] = b
		}
		if step%5 == 0 {
			check(step)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
