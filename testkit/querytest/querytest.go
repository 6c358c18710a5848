// Package querytest is the behavioural suite of the read and write paths
// over a real store: points go in through the write path (on time, late,
// overwritten), rollups run, and every answer — raw or aggregated, from any
// tier, in both orders, paged by limits or cut short by budgets — must equal
// a brute-force computation over the points that were written.
//
// The embedded store runs it in unit tests and the Cassandra store in the
// integration tests, so both stores answer identically.
package querytest

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

// Start is the instant every test clock starts at (storetest.Start):
// TSGATE_TEST_NOW when set, else a fixed instant. Tests place their data
// relative to it, or to a clock made from it, never to time.Now.
func Start() time.Time { return storetest.Start() }

// Clock is a settable clock shared by the write path, the rollup worker and
// the engine, so the suite can let time pass (and points become late)
// without waiting.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock set to t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Env is the gateway's read and write paths over one store, assembled by
// package gateway as `gateway serve` assembles them, with a settable clock
// and without the partition cache (so that every read reaches the store,
// or the reader a test wraps around it).
type Env struct {
	Store   tiers.Store
	Pyramid tiers.Pyramid
	Clock   *Clock
	Gateway *gateway.Gateway
	Engine  query.Engine
	Writer  *ingest.Writer
	Rollups *rollup.Worker
	Config  query.Config

	reads   atomic.Uint64 // seeds each Read's choice of Next or NextBatch
	batches atomic.Int64  // raw points Read took in batches
	// windowBatches counts the windows Read took in batches.
	windowBatches atomic.Int64
}

// Options vary an Env.
type Options struct {
	// Pyramid is the tiers; the default pyramid when nil.
	Pyramid tiers.Pyramid
	// Wrap decorates the partition reader answers are read through.
	Wrap func(tiers.PartitionReader) tiers.PartitionReader
	// Clock is shared with another Env; a new clock at Start when nil.
	Clock *Clock
	// Configure adjusts the gateway's configuration (budgets, limits).
	Configure func(*gateway.Config)
	// Tokens turn authentication on.
	Tokens *auth.Tokens
}

// NewEnv assembles the gateway over store.
func NewEnv(t testing.TB, store tiers.Store, opts Options) *Env {
	p := opts.Pyramid
	if p == nil {
		p = tiers.DefaultPyramid()
	}
	clock := opts.Clock
	if clock == nil {
		clock = &Clock{t: Start()}
	}
	cfg := gateway.DefaultConfig()
	cfg.Pyramid = p
	cfg.Query.Scan.PageSize = 500 // several driver pages per partition
	cfg.CacheBytes = 0
	cfg.ResultsCacheBytes = 0
	cfg.CursorKey = base64.StdEncoding.EncodeToString([]byte("querytest cursor key, 32 bytes.."))
	cfg.Rollup.Interval = 0
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	g, err := gateway.New(context.Background(), store, cfg, gateway.Options{Now: clock.Now, WrapReader: opts.Wrap, Tokens: opts.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Store: store, Pyramid: p, Clock: clock, Gateway: g, Engine: g.Engine, Writer: g.Writer, Rollups: g.Rollups, Config: cfg.Query}
}

// Req is a read of series over span at a resolution, with the largest page.
func (e *Env) Req(series string, span tiers.Span, res router.Resolution) query.Request {
	return query.Request{Series: series, From: params.At(span.From), To: params.At(span.To), Resolution: res, Limit: e.Config.MaxLimit}
}

// Truth is the brute-force model of a series: the last value written for
// each timestamp.
type Truth map[int64]float64

// Points returns the points with from <= t < to, ascending.
func (tr Truth) Points(span tiers.Span) []tiers.Row {
	var out []tiers.Row
	for t, v := range tr {
		if span.Contains(t) {
			out = append(out, tiers.PointRow(t, v))
		}
	}
	slices.SortFunc(out, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	return out
}

// Windows aggregates the windows of width step whose start lies in span,
// each over its whole width, ascending.
func (tr Truth) Windows(span tiers.Span, step int64) []query.Item {
	read := tiers.Span{From: tiers.AlignUp(span.From, step), To: tiers.AlignUp(span.To, step)}
	var out []query.Item
	for _, p := range tr.Points(read) {
		start := tiers.AlignDown(p.T, step)
		if n := len(out); n > 0 && out[n-1].T == start {
			out[n-1].Row.Add(p)
			continue
		}
		out = append(out, query.Item{T: start, Row: p})
	}
	for i := range out {
		out[i].Row.T = 0
	}
	return out
}

// Page is one page of an answer.
type Page struct {
	Items   []query.Item
	Trailer query.Trailer
	Plan    router.Plan
}

// Read runs one page of req.
func (e *Env) Read(ctx context.Context, req query.Request) (Page, error) {
	req.Start = time.Time{}
	res, err := e.Engine.Query(ctx, req)
	if err != nil {
		return Page{}, err
	}
	defer res.Close()
	var p Page
	p.Plan = res.Head().Plan
	// Items are taken one by one and in batches, in a random mix, so that
	// every answer of the suite checks both and any interleaving of them.
	r := rand.New(rand.NewPCG(uint64(p.Plan.Read.From), e.reads.Add(1)))
	for {
		if r.IntN(2) == 0 {
			if b, ok := res.NextBatch(1 + r.IntN(3000)); ok {
				if err := checkBatch(b, res.Head(), res.Item()); err != nil {
					return p, err
				}
				for i := range b.Len() {
					p.Items = append(p.Items, b.Item(i))
				}
				if p.Plan.Step > 0 {
					e.windowBatches.Add(int64(b.Len()))
				} else {
					e.batches.Add(int64(b.Len()))
				}
				continue
			}
		}
		if !res.Next() {
			break
		}
		it := res.Item()
		if p.Plan.Step > 0 {
			it.Row.T = 0
		}
		p.Items = append(p.Items, it)
	}
	p.Trailer = res.Trailer()
	return p, nil
}

// WindowBatches is how many windows reads took in batches.
func (e *Env) WindowBatches() int64 { return e.windowBatches.Load() }

// checkBatch checks a batch's JSON item by item, and that the result's
// current item is its last.
func checkBatch(b query.Batch, h *query.Head, current query.Item) error {
	if b.Len() == 0 {
		return errors.New("an empty batch")
	}
	var want []byte
	for i := range b.Len() {
		if i > 0 {
			want = append(want, ',')
		}
		want = h.AppendItem(want, b.Item(i))
	}
	if got := b.AppendJSON(nil); string(got) != string(want) {
		return fmt.Errorf("a batch of %d points encodes as %.60q..., want %.60q...", b.Len(), got, want)
	}
	if last := b.Item(b.Len() - 1); last != current {
		return fmt.Errorf("after a batch the current item is %+v, want its last %+v", current, last)
	}
	return nil
}

// ReadAll follows cursors until the answer is complete; it fails after
// maxPages pages.
func (e *Env) ReadAll(ctx context.Context, req query.Request, maxPages int) ([]query.Item, int, error) {
	var all []query.Item
	for pages := 1; ; pages++ {
		p, err := e.Read(ctx, req)
		if err != nil {
			return all, pages, err
		}
		if p.Trailer.Err != nil {
			return all, pages, p.Trailer.Err
		}
		all = append(all, p.Items...)
		if p.Trailer.NextCursor == "" {
			return all, pages, nil
		}
		if pages >= maxPages {
			return all, pages, fmt.Errorf("no end after %d pages", pages)
		}
		req.Cursor = p.Trailer.NextCursor
	}
}

// Run runs the suite on store, which holds the tables of pyramid p.
func Run(t *testing.T, store tiers.Store, p tiers.Pyramid) {
	env := NewEnv(t, store, Options{Pyramid: p})
	series := fmt.Sprintf("qt%08x.s", rand.Uint32())
	truth := env.load(t, series, rand.New(rand.NewPCG(41, 42)))
	t.Run("AnswersEqualBruteForce", func(t *testing.T) { env.answersEqualBruteForce(t, series, truth) })
	t.Run("PagingLaw", func(t *testing.T) { env.pagingLaw(t, series, truth) })
	t.Run("PagingLawUnderBudget", func(t *testing.T) { pagingLawUnderBudget(t, store, series, truth, env, false) })
	t.Run("PagingLawUnderStoreFailures", func(t *testing.T) { pagingLawUnderBudget(t, store, series, truth, env, true) })
	t.Run("PagesProgressWhenEveryReadIsSlowerThanTheBudget", func(t *testing.T) { pagesProgress(t, store, series, env) })
	t.Run("CachedBucketsAnswerTheSame", func(t *testing.T) { cachedBuckets(t, store, series, truth, env) })
	t.Run("CachedResultsAnswerTheSame", func(t *testing.T) { cachedResults(t, store, series, truth, env) })
	t.Run("ImportsAfterCachedReadsAreSeenByEveryGateway", func(t *testing.T) { importsSeen(t, store, env) })
	t.Run("CachedRollupsStayCurrent", func(t *testing.T) { cachedRollupsStayCurrent(t, store, env) })
	t.Run("CachedOpenBucketsStayCurrent", func(t *testing.T) { cachedOpenBucketsStayCurrent(t, store, env) })
	t.Run("ManyReadsEqualSingleReads", func(t *testing.T) { env.manyReads(t, series, truth) })
	t.Run("PercentilesWithinAccuracy", func(t *testing.T) { percentilesWithinAccuracy(t, store, env) })
	t.Run("ReadsByMatchEqualBruteForce", func(t *testing.T) {
		// The store's rollup checkpoints follow env's clock, which load
		// moved on: the same clock, so that new writes are rolled up.
		NewEnv(t, store, Options{Pyramid: p, Clock: env.Clock}).manyReadsByMatch(t)
	})
	t.Run("UnknownSeries", func(t *testing.T) {
		_, err := env.Read(context.Background(), env.Req(series+"x", tiers.Span{From: 0, To: 1}, router.Resolution{Kind: router.RawPoints}))
		if !errors.Is(err, query.ErrSeriesNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
}

// load writes about three days of irregular points — bursts a millisecond
// apart, gaps of hours, overwrites — then lets time pass and writes late
// points (new ones and rewrites of old ones), and rolls everything up.
// Values are integers, so sums are exact in any order.
func (e *Env) load(t *testing.T, series string, r *rand.Rand) Truth {
	t.Helper()
	ctx := context.Background()
	truth := Truth{}
	now := e.Clock.Now().UnixMilli()
	start := now - 3*tiers.Day
	var batch []ingest.Point
	flush := func(late bool) {
		if len(batch) == 0 {
			return
		}
		res, err := e.Writer.Write(ctx, batch)
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		if late && res.Late == 0 {
			t.Fatalf("late batch of %d points went to the raw table", len(batch))
		}
		batch = batch[:0]
	}
	// Backfill history as it would have arrived: in time order, on time.
	for ts := start; ts < now; {
		switch r.IntN(20) {
		case 0: // a gap
			ts += r.Int64N(3 * tiers.Hour)
		case 1: // a burst
			for range 1 + r.IntN(30) {
				ts += 1 + r.Int64N(3)
				batch = append(batch, e.point(series, ts, r, truth))
			}
		default:
			ts += 1 + r.Int64N(2*tiers.Minute)
		}
		if ts < now {
			batch = append(batch, e.point(series, ts, r, truth))
		}
		if r.IntN(8) == 0 && len(truth) > 0 {
			// Overwrite a recent point.
			old := ts - r.Int64N(10*tiers.Minute)
			if _, ok := truth[old]; ok {
				batch = append(batch, e.point(series, old, r, truth))
			}
		}
		if len(batch) > 2000 {
			flush(false)
		}
	}
	if len(batch) > 0 {
		res, err := e.Writer.Backfill(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		_ = res
		batch = batch[:0]
	}
	// Time passes; earlier points are now late.
	e.Clock.Advance(2 * time.Hour)
	now = e.Clock.Now().UnixMilli()
	var old []int64
	for ts := range truth {
		old = append(old, ts)
	}
	slices.Sort(old)
	for range 300 {
		var ts int64
		if r.IntN(2) == 0 {
			ts = old[r.IntN(len(old))] // rewrite an existing point
		} else {
			ts = start + r.Int64N(now-start-tiers.Hour) // a new, late point
		}
		batch = append(batch, e.point(series, ts, r, truth))
	}
	flush(true)
	if _, err := e.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatalf("rollups: %v", err)
	}
	return truth
}

func (e *Env) point(series string, ts int64, r *rand.Rand, truth Truth) ingest.Point {
	v := float64(r.IntN(2000001) - 1000000)
	truth[ts] = v
	return ingest.Point{Series: series, T: ts, V: v}
}

var resolutions = []struct {
	name string
	res  router.Resolution
}{
	{"raw", router.Resolution{Kind: router.RawPoints}},
	{"1m", router.Resolution{Kind: router.Window, Window: tiers.Minute}},
	{"5m", router.Resolution{Kind: router.Window, Window: 5 * tiers.Minute}},
	{"90s", router.Resolution{Kind: router.Window, Window: 90 * tiers.Second}},
	{"1h", router.Resolution{Kind: router.Window, Window: tiers.Hour}},
	{"36h", router.Resolution{Kind: router.Window, Window: 36 * tiers.Hour}},
	{"1d", router.Resolution{Kind: router.Window, Window: tiers.Day}},
	{"auto", router.Resolution{Kind: router.Auto}},
}

func (e *Env) randomSpan(r *rand.Rand) tiers.Span {
	now := e.Clock.Now().UnixMilli()
	a := now - 3*tiers.Day - tiers.Hour + r.Int64N(3*tiers.Day+2*tiers.Hour)
	length := []int64{tiers.Minute, tiers.Hour, 5 * tiers.Hour, tiers.Day, 3 * tiers.Day}[r.IntN(5)]
	return tiers.Span{From: a, To: a + 1 + r.Int64N(length)}
}

// want computes the brute-force answer of a plan over span.
func want(truth Truth, span tiers.Span, plan router.Plan, desc bool) []query.Item {
	var items []query.Item
	if plan.Step == 0 {
		for _, p := range truth.Points(span) {
			items = append(items, query.Item{T: p.T, Row: p})
		}
	} else {
		items = truth.Windows(span, plan.Step)
	}
	if desc {
		slices.Reverse(items)
	}
	return items
}

func diff(got, want []query.Item) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d items, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	return ""
}

func (e *Env) answersEqualBruteForce(t *testing.T, series string, truth Truth) {
	r := rand.New(rand.NewPCG(43, 44))
	ctx := context.Background()
	for i := range 40 {
		span := e.randomSpan(r)
		res := resolutions[i%len(resolutions)]
		desc := r.IntN(2) == 0
		req := e.Req(series, span, res.res)
		req.Desc = desc
		req.Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count, query.Avg}
		if res.name == "auto" && r.IntN(2) == 0 {
			req.MaxPoints = 1 + r.Int64N(500)
		}
		p, err := e.Read(ctx, req)
		if err != nil {
			t.Fatalf("%s %+v: %v", res.name, span, err)
		}
		if p.Trailer.Partial || p.Trailer.NextCursor != "" {
			t.Fatalf("%s %+v: an unlimited read was cut short: %+v", res.name, span, p.Trailer)
		}
		if d := diff(p.Items, want(truth, span, p.Plan, desc)); d != "" {
			t.Fatalf("%s span %+v desc %v (plan %s step %d, segments %+v): %s", res.name, span, desc, p.Plan.TierName, p.Plan.Step, p.Plan.Segments, d)
		}
		if p.Trailer.Covered != span {
			t.Fatalf("complete answer covers %+v, want %+v", p.Trailer.Covered, span)
		}
	}
	// Long ranges come from the rollup tiers; their windows must be exact too.
	for _, step := range []int64{tiers.Minute, tiers.Hour, tiers.Day} {
		now := e.Clock.Now().UnixMilli()
		span := tiers.Span{From: now - 4*tiers.Day, To: now}
		req := e.Req(series, span, router.Resolution{Kind: router.Window, Window: step})
		req.Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count}
		p, err := e.Read(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if p.Plan.Segments[0].Tier == tiers.LevelRaw && len(e.Pyramid) > 1 {
			t.Fatalf("step %d: rollups did not run: segments %+v", step, p.Plan.Segments)
		}
		if d := diff(p.Items, want(truth, span, p.Plan, false)); d != "" {
			t.Fatalf("step %d over the whole series (segments %+v): %s", step, p.Plan.Segments, d)
		}
	}
}

// manyReads: Many.Each answers every request of a batch as it answers
// alone, in its own slot, an unknown series among them; Many.All follows
// the cursors of a small page to exactly the brute force.
func (e *Env) manyReads(t *testing.T, series string, truth Truth) {
	r := rand.New(rand.NewPCG(47, 48))
	ctx := context.Background()
	many := e.Gateway.Many
	for round := range 5 {
		reqs := make([]query.Request, 2+r.IntN(6))
		for i := range reqs {
			res := resolutions[r.IntN(len(resolutions))]
			reqs[i] = e.Req(series, e.randomSpan(r), res.res)
			reqs[i].Desc = r.IntN(2) == 0
			reqs[i].Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count}
		}
		unknown := r.IntN(len(reqs))
		reqs[unknown].Series = series + ".unknown"
		got := make([][]query.Item, len(reqs))
		gotErr := make([]error, len(reqs))
		err := many.Each(ctx, time.Now(), slices.Clone(reqs), func(i int, res query.Result, err error) error {
			if err != nil {
				gotErr[i] = err
				return nil
			}
			for res.Next() {
				got[i] = append(got[i], res.Item())
			}
			gotErr[i] = res.Trailer().Err
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, req := range reqs {
			if i == unknown {
				if !errors.Is(gotErr[i], query.ErrSeriesNotFound) {
					t.Fatalf("round %d: the unknown series' read: %v", round, gotErr[i])
				}
				continue
			}
			alone, err := e.Read(ctx, req)
			if err != nil || gotErr[i] != nil {
				t.Fatalf("round %d, request %d: %v / %v", round, i, err, gotErr[i])
			}
			if d := diff(got[i], alone.Items); d != "" {
				t.Fatalf("round %d, request %d (%+v): in a batch %s", round, i, req, d)
			}
		}
	}
	now := e.Clock.Now().UnixMilli()
	span := tiers.Span{From: now - 3*tiers.Day, To: now}
	req := e.Req(series, span, router.Resolution{Kind: router.RawPoints})
	req.Limit = 97
	var all []query.Item
	var head *query.Head
	for it, err := range many.All(ctx, req, func(h *query.Head) { head = h }) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, it)
	}
	if head == nil {
		t.Fatal("All gave no head")
	}
	if d := diff(all, want(truth, span, head.Plan, false)); d != "" {
		t.Fatalf("All over pages of 97: %s", d)
	}
}

// pagingLaw: following cursors with any limit yields exactly the unpaged
// answer.
func (e *Env) pagingLaw(t *testing.T, series string, truth Truth) {
	r := rand.New(rand.NewPCG(45, 46))
	ctx := context.Background()
	for i := range 16 {
		span := e.randomSpan(r)
		res := resolutions[i%len(resolutions)]
		desc := r.IntN(2) == 0
		limit := 1 + r.IntN(5000)
		if r.IntN(3) == 0 {
			limit = 1 + r.IntN(20)
		}
		req := e.Req(series, span, res.res)
		req.Desc = desc
		full, err := e.Read(ctx, req)
		req.Limit = limit
		if err != nil {
			t.Fatal(err)
		}
		pages := len(full.Items)/limit + 2
		got, n, err := e.ReadAll(ctx, req, pages)
		if err != nil {
			t.Fatalf("%s %+v limit %d: %v", res.name, span, limit, err)
		}
		if d := diff(got, full.Items); d != "" {
			t.Fatalf("%s span %+v desc %v limit %d: %d pages: %s", res.name, span, desc, limit, n, d)
		}
		if d := diff(full.Items, want(truth, span, full.Plan, desc)); d != "" {
			t.Fatalf("unpaged %s: %s", res.name, d)
		}
		if len(full.Items) > 0 && n != (len(full.Items)+limit-1)/limit {
			t.Fatalf("%d items with limit %d took %d pages: a cursor was issued with nothing left, or missing", len(full.Items), limit, n)
		}
	}
}

// ErrInjected is the failure the flaky reader injects.
var ErrInjected = errors.New("injected store failure")

// slowReader delays reads of some partitions, so that small budgets cut
// pages short at varying places, and fails some when flaky is set, like a
// replica that times out.
type slowReader struct {
	tiers.PartitionReader
	r     *rand.Rand
	flaky bool
	mu    sync.Mutex
}

type slowPages struct {
	tiers.RowPages
	ctx   context.Context
	delay time.Duration
	fail  bool
	pages int
}

func (s *slowReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	s.mu.Lock()
	var d time.Duration
	if s.r.IntN(4) == 0 {
		d = time.Duration(1+s.r.IntN(15)) * time.Millisecond
	}
	fail := s.flaky && s.r.IntN(12) == 0
	s.mu.Unlock()
	return &slowPages{RowPages: s.PartitionReader.Read(ctx, req), ctx: ctx, delay: d, fail: fail}
}

func (p *slowPages) Next() ([]tiers.Row, error) {
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-p.ctx.Done():
			return nil, context.Cause(p.ctx)
		}
	}
	p.pages++
	if p.fail && p.pages > 1 {
		return nil, ErrInjected
	}
	return p.RowPages.Next()
}

// pagingLawUnderBudget: with a store that is slow for random partitions and
// budgets of a few milliseconds, pages are cut short by the SLO (or, when
// flaky, by failing partitions), and following their cursors still yields
// exactly the full answer.
func pagingLawUnderBudget(t *testing.T, store tiers.Store, series string, truth Truth, base *Env, flaky bool) {
	slow := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Wrap: func(r tiers.PartitionReader) tiers.PartitionReader {
		return &slowReader{PartitionReader: r, r: rand.New(rand.NewPCG(47, 48)), flaky: flaky}
	}})
	r := rand.New(rand.NewPCG(49, 50))
	ctx := context.Background()
	partials := 0
	for i := range 10 {
		span := base.randomSpan(r)
		res := resolutions[i%len(resolutions)]
		desc := r.IntN(2) == 0
		req := base.Req(series, span, res.res)
		req.Desc = desc
		full, err := base.Read(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		req.Limit = 1 + r.IntN(3000)
		req.SLO = time.Duration(2+r.IntN(20)) * time.Millisecond
		wantReason := "slo"
		if flaky {
			req.SLO = time.Minute
			wantReason = "unavailable"
		}
		var got []query.Item
		for pages := 0; ; pages++ {
			if pages > 100000 {
				t.Fatal("no end to the pages")
			}
			p, err := slow.Read(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", res.name, err)
			}
			if p.Trailer.Partial {
				partials++
				if p.Trailer.Reason != wantReason || p.Trailer.NextCursor == "" {
					t.Fatalf("partial page without slo reason or cursor: %+v", p.Trailer)
				}
			}
			// No page holds a point beyond its watermark.
			cov := p.Trailer.Covered
			for _, it := range p.Items {
				end := it.T
				if p.Plan.Step > 0 && !desc {
					end = it.T + p.Plan.Step - 1
				}
				if (!desc && end >= cov.To && cov.To < span.To) || (desc && it.T < cov.From && cov.From > span.From) {
					t.Fatalf("item at %d outside the covered range %+v", it.T, cov)
				}
			}
			got = append(got, p.Items...)
			if p.Trailer.NextCursor == "" {
				break
			}
			req.Cursor = p.Trailer.NextCursor
		}
		if d := diff(got, full.Items); d != "" {
			t.Fatalf("%s span %+v desc %v under budget: %s", res.name, span, desc, d)
		}
	}
	if partials == 0 {
		t.Fatal("no page was ever cut short: the budget test tested nothing")
	}
}

// slowerReader delays the first page of every partition read by delay.
type slowerReader struct {
	tiers.PartitionReader
	delay time.Duration
}

func (s slowerReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	return &slowPages{RowPages: s.PartitionReader.Read(ctx, req), ctx: ctx, delay: s.delay}
}

// pagesProgress: when every partition read takes longer than the budget,
// following cursors still ends — each page completes at least the part of
// the range it needs to move (a bucket, a window), so there are at most as
// many pages as buckets, plus one — and yields exactly the unpaged answer,
// for any budget, resolution and order.
func pagesProgress(t *testing.T, store tiers.Store, series string, base *Env) {
	slow := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Wrap: func(r tiers.PartitionReader) tiers.PartitionReader {
		return slowerReader{PartitionReader: r, delay: 4 * time.Millisecond}
	}})
	r := rand.New(rand.NewPCG(51, 52))
	ctx := context.Background()
	for i := range 8 {
		span := base.randomSpan(r)
		res := resolutions[i%len(resolutions)]
		req := base.Req(series, span, res.res)
		req.Desc = r.IntN(2) == 0
		full, err := base.Read(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		req.SLO = time.Duration(1+r.IntN(3)) * time.Millisecond
		var got []query.Item
		pages := 0
		covered := tiers.Span{From: span.From, To: span.From}
		if req.Desc {
			covered = tiers.Span{From: span.To, To: span.To}
		}
		for {
			pages++
			if bound := full.Trailer.Stats.Buckets + 2; int64(pages) > bound {
				t.Fatalf("%s %+v slo %s: %d pages for %d buckets: a page made no progress", res.name, span, req.SLO, pages, full.Trailer.Stats.Buckets)
			}
			p, err := slow.Read(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", res.name, err)
			}
			if p.Trailer.Err != nil {
				t.Fatalf("%s: a page under the maximum budget failed: %v", res.name, p.Trailer.Err)
			}
			got = append(got, p.Items...)
			if p.Trailer.NextCursor == "" {
				break
			}
			moved := p.Trailer.Covered.To > covered.To || p.Trailer.Covered.From < covered.From
			if len(p.Items) == 0 && !moved {
				t.Fatalf("%s: page %d holds no point and covers %+v as the page before it did", res.name, pages, covered)
			}
			covered = p.Trailer.Covered
			req.Cursor = p.Trailer.NextCursor
		}
		if d := diff(got, full.Items); d != "" {
			t.Fatalf("%s span %+v desc %v slo %s, %d pages: %s", res.name, span, req.Desc, req.SLO, pages, d)
		}
	}
}

// readPages follows the cursors of req, at most maxPages pages, and
// returns the items and the partitions served from the cache.
func (e *Env) readPages(t *testing.T, req query.Request, maxPages int) (items []query.Item, cacheHits int64) {
	t.Helper()
	for pages := 0; ; pages++ {
		p, err := e.Read(context.Background(), req)
		if err != nil || p.Trailer.Err != nil {
			t.Fatal(err, p.Trailer.Err)
		}
		cacheHits += p.Trailer.Stats.CacheHits
		items = append(items, p.Items...)
		if p.Trailer.NextCursor == "" {
			return items, cacheHits
		}
		if pages > maxPages {
			t.Fatal("no end of pages")
		}
		req.Cursor = p.Trailer.NextCursor
	}
}

// importsSeen: a gateway caches final raw buckets; another gateway over
// the same store imports history into those very buckets (older than the
// lateness window, so straight into the raw partitions, which the first
// gateway's cache takes as final). The first gateway's read once its
// late marks expire (--series-cache-ttl) has the imported points: the
// import's rewrite marks change the buckets' cache keys. An import
// through the first gateway itself is in its very next read.
func importsSeen(t *testing.T, store tiers.Store, base *Env) {
	ctx := context.Background()
	reader := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Configure: func(c *gateway.Config) { c.CacheBytes = 64 << 20 }})
	importer := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock})
	series := fmt.Sprintf("qt%08x.imp", rand.Uint32())
	width := base.Pyramid.Raw().BucketWidth
	end := tiers.AlignDown(base.Clock.Now().UnixMilli()-2*tiers.Hour, width)
	span := tiers.Span{From: end - 4*width, To: end}
	truth := Truth{}
	r := rand.New(rand.NewPCG(51, 52))
	importSome := func(through *Env, n int) {
		t.Helper()
		// The first and last millisecond of the span, so that no later
		// import widens the series' span: the reader caches that for
		// --series-cache-ttl, a bound of its own.
		pts := []ingest.Point{{Series: series, T: span.From, V: 1}, {Series: series, T: span.To - 1, V: 2}}
		for range n - 2 {
			// Few distinct times, so that imports also overwrite points.
			ts := span.From + r.Int64N(span.To-span.From)/1000*1000
			pts = append(pts, ingest.Point{Series: series, T: ts, V: float64(r.IntN(1000))})
		}
		res, err := through.Gateway.Importer.Import(ctx, pts)
		if err != nil || res.Raw != n {
			t.Fatalf("import: %+v, %v", res, err)
		}
		for _, p := range pts {
			truth[p.T] = p.V
		}
	}
	read := func(when string) int64 {
		t.Helper()
		got, hits := reader.readPages(t, reader.Req(series, span, router.Resolution{Kind: router.RawPoints}), 100)
		if d := diff(got, want(truth, span, router.Plan{}, false)); d != "" {
			t.Fatalf("%s: %s", when, d)
		}
		return hits
	}
	importSome(importer, 200)
	hits := int64(0)
	for round := range 6 {
		read("first read")
		hits += read("repeated read")
		importSome(reader, 1+r.IntN(20))
		read(fmt.Sprintf("round %d, read after the gateway's own import", round))
		importSome(importer, 1+r.IntN(20))
		base.Clock.Advance(reader.Gateway.Config.SeriesTTL + time.Second)
		read(fmt.Sprintf("round %d, read after another gateway's import", round))
	}
	if hits == 0 {
		t.Fatal("no repeated read was served from the cache: the test shows nothing")
	}

	// History older than the finer tiers keep goes straight into the hour
	// tier, whose old buckets the reader caches as final. The importing
	// gateway gives the series a new generation; the reader keys its
	// buckets on it once its series cache has expired.
	hist := series + ".hist"
	h0 := tiers.AlignDown(base.Clock.Now().UnixMilli()-100*tiers.Day, tiers.Day)
	histSpan := tiers.Span{From: h0, To: h0 + tiers.Day}
	histTruth := Truth{}
	importAt := func(ts []int64) {
		t.Helper()
		var pts []ingest.Point
		for _, at := range ts {
			pts = append(pts, ingest.Point{Series: hist, T: at, V: float64(r.IntN(1000))})
		}
		res, err := importer.Gateway.Importer.Import(ctx, pts)
		if err != nil || res.Raw != 0 || res.Dropped != 0 || len(res.Aggregated) != 1 {
			t.Fatalf("import of history: %+v, %v", res, err)
		}
		for _, p := range pts {
			histTruth[p.T] = p.V
		}
	}
	var reads []int64 // rows_read of each readHours
	readHours := func(when string) int64 {
		t.Helper()
		req := reader.Req(hist, histSpan, router.Resolution{Kind: router.Window, Window: tiers.Hour})
		req.Aggs = []query.Agg{query.Min, query.Max, query.Sum, query.Count}
		p, err := reader.Read(ctx, req)
		if err != nil || p.Trailer.Err != nil || p.Trailer.NextCursor != "" {
			t.Fatal(err, p.Trailer)
		}
		want := histTruth.Windows(histSpan, tiers.Hour)
		if d := diff(p.Items, want); d != "" {
			t.Fatalf("%s: %s", when, d)
		}
		reads = append(reads, p.Trailer.Stats.RowsRead)
		return p.Trailer.Stats.CacheHits
	}
	// Windows of the first ten hours and the last, so that later imports
	// fall inside the series' span: only the cache of buckets is at stake.
	var first []int64
	for m := int64(0); m < 10*60; m += 10 {
		first = append(first, h0+m*tiers.Minute)
	}
	importAt(append(first, h0+23*tiers.Hour+30*tiers.Minute))
	readHours("first read of history")
	if readHours("repeated read of history") == 0 {
		t.Fatal("the hour tier's old bucket was not served from the cache: the test shows nothing")
	}
	// One import wrote each window once: a read of them reads each row
	// once, whether it loads the bucket into the cache or finds it there.
	if windows := int64(11); reads[0] != windows || reads[1] != windows {
		t.Fatalf("rows_read of a cold and a warm read: %v, want %d each", reads, windows)
	}
	for hour := int64(12); hour < 15; hour++ {
		importAt([]int64{h0 + hour*tiers.Hour + 7*tiers.Minute, h0 + hour*tiers.Hour + 40*tiers.Minute})
		base.Clock.Advance(reader.Gateway.Config.SeriesTTL + time.Second)
		readHours(fmt.Sprintf("read after an import of hour %d", hour))
	}
}

// cachedBuckets: with the cache of final buckets on, large enough to hold
// them or so small that most buckets do not fit, answers and pages stay
// exactly those of the store, cold and warm, and a warm read of final raw
// buckets is served from memory whatever the paging.
// cachedResults: with the results cache on, large or so small that most
// answers do not fit, with and without the cache of final buckets under
// it, answers and pages stay exactly those of the store however often
// they are repeated, and repeats take windows from the cache.
func cachedResults(t *testing.T, store tiers.Store, series string, truth Truth, base *Env) {
	for _, c := range []struct{ results, buckets int64 }{{64 << 20, 0}, {64 << 20, 64 << 20}, {16 << 10, 0}} {
		e := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Configure: func(g *gateway.Config) {
			g.ResultsCacheBytes, g.CacheBytes = c.results, c.buckets
		}})
		for range 3 {
			e.answersEqualBruteForce(t, series, truth)
			e.pagingLaw(t, series, truth)
		}
		_, _, served := e.Gateway.Results.Stats()
		t.Logf("results cache of %d bytes over a bucket cache of %d: %d windows served, %d bytes held", c.results, c.buckets, served, e.Gateway.Results.Bytes())
		if c.results > 1<<20 && served == 0 {
			t.Fatalf("results cache of %d bytes: no repeated read took a window from it", c.results)
		}
	}
}

func cachedBuckets(t *testing.T, store tiers.Store, series string, truth Truth, base *Env) {
	for _, size := range []int64{64 << 20, 16 << 10} {
		e := NewEnv(t, store, Options{Pyramid: base.Pyramid, Clock: base.Clock, Configure: func(c *gateway.Config) { c.CacheBytes = size }})
		for range 2 {
			e.answersEqualBruteForce(t, series, truth)
			e.pagingLaw(t, series, truth)
		}
		now := e.Clock.Now().UnixMilli()
		span := tiers.Span{From: now - 3*tiers.Day - tiers.Hour, To: now}
		hits := int64(0)
		for _, limit := range []int{e.Config.MaxLimit, 777, 5000} {
			for _, desc := range []bool{false, true} {
				req := e.Req(series, span, router.Resolution{Kind: router.RawPoints})
				req.Desc, req.Limit = desc, limit
				got, h := e.readPages(t, req, len(truth)/limit+2)
				hits += h
				if d := diff(got, want(truth, span, router.Plan{}, desc)); d != "" {
					t.Fatalf("cache of %d bytes, limit %d desc %v: %s", size, limit, desc, d)
				}
			}
		}
		t.Logf("cache of %d bytes: %d partitions served from memory, %d points and %d windows handed over in batches", size, hits, e.batches.Load(), e.windowBatches.Load())
		if size > 1<<20 && hits == 0 {
			t.Fatalf("cache of %d bytes: no read of final raw buckets was served from memory", size)
		}
		if size > 1<<20 && e.batches.Load() == 0 {
			t.Fatalf("cache of %d bytes: no cached raw points were handed over in batches", size)
		}
	}
}
