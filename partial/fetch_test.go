package partial

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/tiers"
)

// memReader is a fake PartitionReader over in-memory partitions, with
// injectable delays and failures.
type memReader struct {
	parts   map[tiers.PartitionKey][]tiers.Row // ascending
	delay   func(tiers.PartitionKey) time.Duration
	fail    func(tiers.PartitionKey) bool
	open    atomic.Int64
	maxOpen atomic.Int64
}

type memPages struct {
	ctx   context.Context
	r     *memReader
	rows  []tiers.Row
	size  int
	err   error
	delay time.Duration
	once  bool
}

var errInjected = errors.New("injected partition failure")

func (r *memReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	n := r.open.Add(1)
	for {
		m := r.maxOpen.Load()
		if n <= m || r.maxOpen.CompareAndSwap(m, n) {
			break
		}
	}
	var rows []tiers.Row
	for _, row := range r.parts[req.Key] {
		if req.Span.Contains(row.T) {
			rows = append(rows, row)
		}
	}
	if req.Desc {
		slices.Reverse(rows)
	}
	p := &memPages{ctx: ctx, r: r, rows: rows, size: req.PageSize}
	if r.delay != nil {
		p.delay = r.delay(req.Key)
	}
	if r.fail != nil && r.fail(req.Key) {
		p.err = errInjected
	}
	return p
}

func (p *memPages) Next() ([]tiers.Row, error) {
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-p.ctx.Done():
			return nil, context.Cause(p.ctx)
		}
	}
	if err := p.ctx.Err(); err != nil {
		return nil, context.Cause(p.ctx)
	}
	if len(p.rows) == 0 {
		if p.err != nil {
			return nil, p.err
		}
		return nil, tiers.ErrDone
	}
	n := min(p.size, len(p.rows))
	if p.err != nil && !p.once {
		// Fail midway: deliver part of the partition first.
		p.once = true
		n = min(n, len(p.rows)/2)
		if n == 0 {
			return nil, p.err
		}
	}
	page := slices.Clone(p.rows[:n])
	p.rows = p.rows[n:]
	return page, nil
}

func (p *memPages) Close() error {
	if p.r != nil {
		p.r.open.Add(-1)
		p.r = nil
	}
	return nil
}

// fixture builds a series split into buckets of width w with eb event
// buckets, and the groups that read span.
type fixture struct {
	reader *memReader
	all    []tiers.Row // every row, ascending
	layout tiers.Layout
}

func newFixture(r *rand.Rand, span tiers.Span, w int64, eb int, withLate bool) *fixture {
	f := &fixture{reader: &memReader{parts: map[tiers.PartitionKey][]tiers.Row{}},
		layout: tiers.Layout{{Since: 0, Width: w, EventBuckets: eb}}}
	byT := map[int64]tiers.Row{}
	for t := span.From; t < span.To; t += 1 + r.Int64N(w/20+1) {
		bucket, e := f.layout.Locate(t)
		row := tiers.PointRow(t, float64(r.IntN(1000)))
		k := tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: bucket, EventBucket: e}
		f.reader.parts[k] = append(f.reader.parts[k], row)
		byT[t] = row
		if withLate && r.IntN(10) == 0 {
			// A late rewrite of the same t wins over the raw row.
			late := tiers.PointRow(t, -row.Sum-1)
			lk := tiers.PartitionKey{Table: tiers.TableLate, Series: "s", Bucket: bucket}
			f.reader.parts[lk] = append(f.reader.parts[lk], late)
			byT[t] = late
		}
	}
	for _, row := range byT {
		f.all = append(f.all, row)
	}
	slices.SortFunc(f.all, func(a, b tiers.Row) int { return int(a.T - b.T) })
	return f
}

func (f *fixture) groups(span tiers.Span, desc, withLate bool, pageSize int) iter.Seq[Group] {
	return func(yield func(Group) bool) {
		for b := range f.layout.Buckets(span, desc) {
			gs := b.Span().Intersect(span)
			g := Group{Span: gs, Bucket: b}
			for e := range b.EventBuckets {
				g.Reads = append(g.Reads, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: b.Start, EventBucket: e}, Span: gs, Desc: desc, PageSize: pageSize})
			}
			if withLate {
				g.Reads = append(g.Reads, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableLate, Series: "s", Bucket: b.Start}, Span: gs, Desc: desc, PageSize: pageSize})
			}
			if !yield(g) {
				return
			}
		}
	}
}

func (f *fixture) want(span tiers.Span, desc bool) []tiers.Row {
	var out []tiers.Row
	for _, r := range f.all {
		if span.Contains(r.T) {
			out = append(out, r)
		}
	}
	if desc {
		slices.Reverse(out)
	}
	return out
}

func drain(s *Stream) []tiers.Row {
	var out []tiers.Row
	for s.Next() {
		out = append(out, s.At())
	}
	return out
}

// A complete fetch equals the brute-force answer, in both orders, with late
// rows overriding raw ones, and never holds more partitions open than the
// parallelism.
func TestFetchEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for iter := range 200 {
		desc := iter%2 == 1
		withLate := iter%3 == 0
		eb := 1 + r.IntN(5)
		w := int64(1000 + r.IntN(5000))
		f := newFixture(r, tiers.Span{From: 0, To: 40 * w}, w, eb, withLate)
		a, b := r.Int64N(42*w)-w, r.Int64N(42*w)-w
		span := tiers.Span{From: min(a, b), To: max(a, b) + 1}
		par := eb + 1 + r.IntN(8)
		var stats Stats
		s := Fetch(context.Background(), f.reader, span, f.groups(span, desc, withLate, 1+r.IntN(50)), desc,
			FetchOptions{Parallelism: par, Lookahead: 1 + r.IntN(3)}, &stats)
		got := drain(s)
		closeClean(t, s)
		want := f.want(span, desc)
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("iteration %d desc %v: got %d rows, want %d", iter, desc, len(got), len(want))
		}
		end := span.To
		if desc {
			end = span.From
		}
		if s.Watermark() != end {
			t.Fatalf("complete fetch has watermark %d, want %d", s.Watermark(), end)
		}
		if m := f.reader.maxOpen.Load(); m > int64(par) {
			t.Fatalf("%d partitions open at once, parallelism %d", m, par)
		}
		if f.reader.open.Load() != 0 {
			t.Fatalf("%d partition reads left open", f.reader.open.Load())
		}
	}
}

// A fetch keeps as many partitions open as its parallelism allows, reading
// upcoming groups while the merge works on earlier ones, whatever the size
// of the groups: with small groups (one partition per bucket, as the rollup
// tiers have) it reads many buckets ahead, not one.
func TestFetchReadsAheadUpToParallelism(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	for _, eb := range []int{1, 2, 4} {
		f := newFixture(r, tiers.Span{From: 0, To: 20000}, 1000, eb, false)
		// Slow partitions: every read is still open when the launcher has
		// opened as many as it may.
		f.reader.delay = func(tiers.PartitionKey) time.Duration { return 30 * time.Millisecond }
		span := tiers.Span{From: 0, To: 20000}
		const par = 8
		var stats Stats
		s := Fetch(context.Background(), f.reader, span, f.groups(span, false, false, 1000), false,
			FetchOptions{Parallelism: par, Lookahead: 1}, &stats)
		got := drain(s)
		closeClean(t, s)
		if !slices.Equal(got, f.want(span, false)) {
			t.Fatalf("%d event buckets: got %d rows, want %d", eb, len(got), len(f.want(span, false)))
		}
		if m := f.reader.maxOpen.Load(); m != par {
			t.Fatalf("%d event buckets: at most %d partitions were open at once, want the parallelism %d", eb, m, par)
		}
	}
}

// A read that ends late does not hold the others back: while the first
// bucket's slow partition is read, the fetch goes on reading later
// buckets, keeping the parallelism busy, until it has opened aheadFactor
// times the parallelism of partitions the merge has not passed — and no
// more, however many buckets remain.
func TestFetchReadsPastASlowPartition(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	const eb, par = 4, 8
	span := tiers.Span{From: 0, To: 40000}
	f := newFixture(r, span, 1000, eb, false)
	slow := tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: 0, EventBucket: 0}
	release := make(chan struct{})
	var reads atomic.Int64
	f.reader.delay = func(k tiers.PartitionKey) time.Duration {
		if k != slow {
			reads.Add(1)
		}
		return 0
	}
	gate := &gatedReader{memReader: f.reader, slow: slow, release: release}
	var stats Stats
	s := Fetch(context.Background(), gate, span, f.groups(span, false, false, 1000), false,
		FetchOptions{Parallelism: par, Lookahead: 1}, &stats)
	got := make(chan []tiers.Row)
	go func() { got <- drain(s) }()
	// Every partition the launcher may open ahead, but the slow one.
	want := int64(aheadFactor*par - 1)
	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a read too many would show now
	if n := reads.Load(); n != want {
		t.Fatalf("%d partitions read while the first bucket's slow partition was, want %d", n, want)
	}
	close(release)
	if rows := <-got; !slices.Equal(rows, f.want(span, false)) {
		t.Fatalf("got %d rows, want %d", len(rows), len(f.want(span, false)))
	}
	closeClean(t, s)
	if m := f.reader.maxOpen.Load(); m > par {
		t.Fatalf("%d partitions open at once, more than the parallelism %d", m, par)
	}
}

// gatedReader holds the read of one partition until release is closed.
type gatedReader struct {
	*memReader
	slow    tiers.PartitionKey
	release chan struct{}
}

func (r *gatedReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	pages := r.memReader.Read(ctx, req)
	if req.Key == r.slow {
		<-r.release
	}
	return pages
}

// checkPrefix asserts the watermark law: everything delivered lies before
// the watermark, and everything before the watermark was delivered.
func checkPrefix(t *testing.T, got, want []tiers.Row, wm int64, desc bool) {
	t.Helper()
	var before []tiers.Row
	for _, r := range want {
		if (!desc && r.T < wm) || (desc && r.T >= wm) {
			before = append(before, r)
		}
	}
	if !slices.Equal(got, before) && len(got)+len(before) > 0 {
		t.Fatalf("desc %v watermark %d: delivered %d rows, %d exist before the watermark", desc, wm, len(got), len(before))
	}
}

func TestFetchStopsAtFailedPartitionWithWatermark(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for iter := range 200 {
		desc := iter%2 == 1
		f := newFixture(r, tiers.Span{From: 0, To: 30000}, 1000, 1+r.IntN(4), false)
		var keys []tiers.PartitionKey
		for k := range f.reader.parts {
			keys = append(keys, k)
		}
		bad := keys[r.IntN(len(keys))]
		f.reader.fail = func(k tiers.PartitionKey) bool { return k == bad }
		span := tiers.Span{From: 0, To: 30000}
		var stats Stats
		s := Fetch(context.Background(), f.reader, span, f.groups(span, desc, false, 1+r.IntN(20)), desc, FetchOptions{Parallelism: 8, Lookahead: 1}, &stats)
		got := drain(s)
		s.Close()
		if !errors.Is(s.Err(), errInjected) {
			t.Fatalf("err = %v, want the partition's failure", s.Err())
		}
		if Reason(s.Err()) != "unavailable" {
			t.Fatalf("reason %q", Reason(s.Err()))
		}
		checkPrefix(t, got, f.want(span, desc), s.Watermark(), desc)
	}
}

func TestFetchStopsAtBudgetWithWatermark(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	for iter := range 40 {
		desc := iter%2 == 1
		f := newFixture(r, tiers.Span{From: 0, To: 60000}, 1000, 4, iter%3 == 0)
		slow := r.IntN(60)
		f.reader.delay = func(k tiers.PartitionKey) time.Duration {
			if int(k.Bucket/1000)%7 == slow%7 {
				return 50 * time.Millisecond
			}
			return 0
		}
		span := tiers.Span{From: 0, To: 60000}
		ctx, cancel := WithBudget(context.Background(), time.Now(), time.Duration(1+r.IntN(30))*time.Millisecond)
		var stats Stats
		s := Fetch(ctx, f.reader, span, f.groups(span, desc, iter%3 == 0, 5), desc, FetchOptions{Parallelism: 6, Lookahead: 1}, &stats)
		got := drain(s)
		s.Close()
		cancel()
		if s.Err() != nil && Reason(s.Err()) != "slo" {
			t.Fatalf("err %v classified %q, want slo", s.Err(), Reason(s.Err()))
		}
		checkPrefix(t, got, f.want(span, desc), s.Watermark(), desc)
		if f.reader.open.Load() != 0 {
			t.Fatalf("%d reads left open after Close", f.reader.open.Load())
		}
	}
}

// A fetch whose budget runs out between two groups — the launcher gives up
// handing the next group over and closes the queue of groups while the
// merge is still busy with the last one — stops with the budget's error: it
// never takes the closed queue for the end of the range, which would end a
// page as complete with points missing.
func TestFetchStoppedBetweenGroupsIsNotComplete(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 40))
	stopped := 0
	for iter := range 200 {
		desc := iter%2 == 1
		f := newFixture(r, tiers.Span{From: 0, To: 10000}, 1000, 1, false)
		span := tiers.Span{From: 0, To: 10000}
		// Groups that take a while to enumerate, and a merge that is busy
		// between rows: the budget often runs out while the merge is busy
		// and no group is waiting for it.
		groups := func(yield func(Group) bool) {
			for g := range f.groups(span, desc, false, 1000) {
				time.Sleep(time.Millisecond)
				if !yield(g) {
					return
				}
			}
		}
		ctx, cancel := WithBudget(context.Background(), time.Now(), time.Duration(r.IntN(10000))*time.Microsecond)
		var stats Stats
		s := Fetch(ctx, f.reader, span, groups, desc, FetchOptions{Parallelism: 1, Lookahead: 1}, &stats)
		var got []tiers.Row
		for s.Next() {
			got = append(got, s.At())
			if len(got)%5 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		s.Close()
		cancel()
		if s.Err() != nil {
			stopped++
			if Reason(s.Err()) != "slo" {
				t.Fatalf("err %v classified %q, want slo", s.Err(), Reason(s.Err()))
			}
		}
		checkPrefix(t, got, f.want(span, desc), s.Watermark(), desc)
	}
	if stopped == 0 {
		t.Fatal("no fetch ran out of budget: the test tested nothing")
	}
}

func TestFetchFailsOversizedGroupInsteadOfDeadlocking(t *testing.T) {
	f := newFixture(rand.New(rand.NewPCG(1, 2)), tiers.Span{From: 0, To: 5000}, 1000, 4, false)
	span := tiers.Span{From: 0, To: 5000}
	var stats Stats
	s := Fetch(context.Background(), f.reader, span, f.groups(span, false, false, 10), false, FetchOptions{Parallelism: 2}, &stats)
	drain(s)
	s.Close()
	if s.Err() == nil || s.Watermark() != 0 {
		t.Fatalf("err %v watermark %d", s.Err(), s.Watermark())
	}
}

func ExampleReason() {
	fmt.Println(Reason(nil), Reason(ErrBudgetExceeded), Reason(errInjected))
	// Output: slo unavailable
}

// With FetchOptions.Rows, a reader that takes only that many rows makes
// the fetch open about the groups those rows need, once it knows how many
// rows a group holds, not as many more as the parallelism allows; the rows
// it returns are the same.
func TestFetchReadsAheadOnlyAsFarAsTheRowsTaken(t *testing.T) {
	r := &memReader{parts: map[tiers.PartitionKey][]tiers.Row{}}
	var groups []Group
	for b := range int64(40) {
		k := tiers.PartitionKey{Table: tiers.TableRaw, Series: "s", Bucket: b * 100}
		for ts := b * 100; ts < b*100+100; ts++ {
			r.parts[k] = append(r.parts[k], tiers.PointRow(ts, float64(ts)))
		}
		span := tiers.Span{From: b * 100, To: b*100 + 100}
		groups = append(groups, Group{Span: span, Reads: []tiers.ReadRequest{{Key: k, Span: span, PageSize: 30}}})
	}
	for _, rows := range []int{0, 2451} {
		var stats Stats
		s := Fetch(context.Background(), r, tiers.Span{From: 0, To: 4000}, slices.Values(groups), false,
			FetchOptions{Parallelism: 16, Lookahead: 1, Rows: rows}, &stats)
		var got []int64
		for len(got) < 2451 && s.Next() {
			got = append(got, s.At().T)
		}
		// Give a launcher that would read further the time to do so.
		time.Sleep(20 * time.Millisecond)
		s.Close()
		for i, ts := range got {
			if ts != int64(i) {
				t.Fatalf("rows %d: row %d has t %d", rows, i, ts)
			}
		}
		n := stats.Partitions.Load()
		// 2,451 rows are 25 groups and one row of the 26th.
		if rows == 0 && n < 38 {
			t.Fatalf("without a row bound only %d partitions were opened", n)
		}
		if rows > 0 && n > 28 {
			t.Fatalf("2451 rows of groups of 100 opened %d partitions, want at most 28", n)
		}
	}
}

// runBuckets serves every bucket of a fixture from memory: its event-bucket
// partitions as one encoded run, and its late partition, if any, as a read
// merged on top.
type runBuckets struct {
	f *fixture
	// mixed, when set, serves some buckets from memory, loads some and
	// leaves the rest to partition reads, by the bucket's start.
	mixed bool
	seed  uint64
}

func (b runBuckets) Bucket(g Group) BucketRead {
	if b.mixed {
		switch rand.New(rand.NewPCG(b.seed, uint64(g.Bucket.Start))).IntN(3) {
		case 1:
			br := b.cached(g)
			run := br.Run
			br.Run, br.Load = nil, func(context.Context) (*Run, error) { return run, nil }
			return br
		case 2:
			return BucketRead{}
		}
	}
	return b.cached(g)
}

func (b runBuckets) cached(g Group) BucketRead {
	run := &Run{}
	var rest []tiers.ReadRequest
	var rows []tiers.Row
	for _, r := range g.Reads {
		if r.Key.Table == tiers.TableLate {
			rest = append(rest, r)
			continue
		}
		rows = append(rows, b.f.reader.parts[r.Key]...)
	}
	slices.SortFunc(rows, func(a, b tiers.Row) int { return int(a.T - b.T) })
	for _, r := range rows {
		run.T, run.V = append(run.T, r.T), append(run.V, r.Sum)
	}
	run.Encode()
	return BucketRead{Run: run, Rest: rest, Covered: len(g.Reads) - len(rest)}
}

// randomFetch is a random series of 20 buckets of eb event buckets and a
// span over it; iteration iter reads it descending when odd and with
// late partitions every third time.
func randomFetch(r *rand.Rand, iter int) (f *fixture, span tiers.Span, eb int, desc, withLate bool) {
	desc, withLate = iter%2 == 1, iter%3 == 0
	eb = 1 + r.IntN(4)
	w := int64(1000 + r.IntN(5000))
	f = newFixture(r, tiers.Span{From: 0, To: 20 * w}, w, eb, withLate)
	a, b := r.Int64N(22*w)-w, r.Int64N(22*w)-w
	return f, tiers.Span{From: min(a, b), To: max(a, b) + 1}, eb, desc, withLate
}

// Rows taken in runs (NextRun) and one by one (Next), in any mix, are the
// brute-force answer in order; after each run the current row is its last
// and the watermark is just past it. Runs are handed over only for buckets
// with nothing merged on top, and their JSON is the rows'.
func TestFetchNextRunEqualsNext(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for iter := range 200 {
		f, span, eb, desc, withLate := randomFetch(r, iter)
		var stats Stats
		s := Fetch(context.Background(), f.reader, span, f.groups(span, desc, withLate, 1+r.IntN(50)), desc,
			FetchOptions{Parallelism: eb + 2, Lookahead: 2, Buckets: runBuckets{f: f}}, &stats)
		var got []tiers.Row
		runs := 0
		for {
			if r.IntN(3) > 0 {
				if rs, ok := s.NextRun(1 + r.IntN(60)); ok {
					runs++
					if withLate {
						t.Fatalf("iteration %d: a run was handed over for a bucket with a late partition to merge", iter)
					}
					var enc []byte
					for k := range rs.Len() {
						row := rs.Row(k)
						got = append(got, row)
						if k > 0 {
							enc = append(enc, ',')
						}
						enc = jsonenc.AppendPoint(enc, row.T, row.Value())
					}
					if string(rs.AppendJSON(nil)) != string(enc) {
						t.Fatalf("iteration %d: run JSON %.60q, want %.60q", iter, rs.AppendJSON(nil), enc)
					}
					last := got[len(got)-1]
					if s.At() != last || rs.Last() != last {
						t.Fatalf("iteration %d: after a run the current row is %+v, want %+v", iter, s.At(), last)
					}
					if wm := s.Watermark(); (!desc && wm != last.T+1) || (desc && wm != last.T) {
						t.Fatalf("iteration %d: watermark %d after a run ending at %d", iter, wm, last.T)
					}
					continue
				}
			}
			if !s.Next() {
				break
			}
			got = append(got, s.At())
		}
		closeClean(t, s)
		want := f.want(span, desc)
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("iteration %d desc %v late %v: got %d rows, want %d", iter, desc, withLate, len(got), len(want))
		}
		end := span.To
		if desc {
			end = span.From
		}
		if s.Watermark() != end {
			t.Fatalf("iteration %d: complete fetch has watermark %d, want %d", iter, s.Watermark(), end)
		}
		if !withLate && len(want) > 50 && runs == 0 {
			t.Fatalf("iteration %d: %d rows from cached runs, none handed over as a run", iter, len(want))
		}
	}
}

// Groups served from memory are merged on the reader's goroutine until the
// first that needs a read; from there a launcher opens partitions ahead.
// Whatever the mix of cached, loaded and read buckets, in either order and
// with a read stopped anywhere, the rows are the brute-force answer and
// closing the stream returns.
func TestFetchMixedCachedAndReadBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for iter := range 300 {
		f, span, eb, desc, withLate := randomFetch(r, iter)
		var stats Stats
		opts := FetchOptions{Parallelism: eb + 2, Lookahead: 2, Buckets: runBuckets{f: f, mixed: true, seed: r.Uint64()}}
		if iter%4 == 0 {
			opts.Rows = 1 + r.IntN(300)
		}
		groups := f.groups(span, desc, withLate, 1+r.IntN(50))
		s := Fetch(context.Background(), f.reader, span, groups, desc, opts, &stats)
		want := f.want(span, desc)
		stopAt := len(want) + 1
		if iter%5 == 0 {
			stopAt = r.IntN(len(want) + 1)
		}
		var got []tiers.Row
		for len(got) < stopAt {
			if r.IntN(2) == 0 {
				if rs, ok := s.NextRun(1 + r.IntN(60)); ok {
					for k := range rs.Len() {
						got = append(got, rs.Row(k))
					}
					continue
				}
			}
			if !s.Next() {
				break
			}
			got = append(got, s.At())
		}
		closeClean(t, s)
		if stopAt > len(want) {
			if !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("iteration %d desc %v late %v: got %d rows, want %d", iter, desc, withLate, len(got), len(want))
			}
			var buckets int64
			for range groups {
				buckets++
			}
			if stats.Buckets.Load() != buckets {
				t.Fatalf("iteration %d: %d buckets counted, want %d", iter, stats.Buckets.Load(), buckets)
			}
		} else if !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("iteration %d: the first %d rows differ from the answer's", iter, len(got))
		}
	}
}

// closeClean closes s and fails t if the stream stopped on an error.
func closeClean(t *testing.T, s *Stream) {
	t.Helper()
	s.Close()
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
}
