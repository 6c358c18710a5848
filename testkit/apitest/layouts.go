package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/layouts"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// RunLayouts runs the scenarios of layout administration and blocked
// series, each over a fresh store from newStore and, where it matters, two
// gateway instances sharing it. These scenarios move the clock forward
// (up to about an hour), as a layout change only takes effect in the
// future.
func RunLayouts(t *testing.T, newStore func(t *testing.T) tiers.Store) {
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, store tiers.Store)
	}{
		{"LayoutChangeKeepsEveryPoint", layoutChangeKeepsEveryPoint},
		{"LayoutChangeValidation", layoutChangeValidation},
		{"AutoSplitKeepsLaterPartitionsUnderTheLimit", autoSplitKeepsPartitionsUnderTheLimit},
		{"BlockedSeriesNeverReachTheirPartitions", blockedSeriesNeverReachTheirPartitions},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, newStore(t)) })
	}
}

// Gateway is one gateway instance over a shared store, wired as gateway
// serve wires it: the series cache, layout administration with its
// tracker and blocked list, the guarded engine and the write path.
type Gateway struct {
	*Server
	Layouts *layouts.Service
}

// Counting counts, per series, the partition reads and writes and the
// registry notes that reach the store beneath it.
type Counting struct {
	tiers.Store
	mu                   sync.Mutex
	reads, writes, notes map[string]int
}

// NewCounting returns store with its partition traffic counted.
func NewCounting(store tiers.Store) *Counting {
	c := &Counting{Store: store}
	c.Reset()
	return c
}

// Reset zeroes the counts.
func (c *Counting) Reset() {
	c.mu.Lock()
	c.reads, c.writes, c.notes = map[string]int{}, map[string]int{}, map[string]int{}
	c.mu.Unlock()
}

// Touched returns the partition reads, partition writes and registry notes
// of series since the last Reset.
func (c *Counting) Touched(series string) (reads, writes, notes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[series], c.writes[series], c.notes[series]
}

func (c *Counting) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	c.mu.Lock()
	c.reads[req.Key.Series]++
	c.mu.Unlock()
	return c.Store.Read(ctx, req)
}

func (c *Counting) Write(ctx context.Context, writes []tiers.PartitionWrite) error {
	c.mu.Lock()
	for _, w := range writes {
		c.writes[w.Key.Series]++
	}
	c.mu.Unlock()
	return c.Store.Write(ctx, writes)
}

func (c *Counting) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	c.mu.Lock()
	for _, s := range spans {
		c.notes[s.ID]++
	}
	c.mu.Unlock()
	return c.Store.NoteSeries(ctx, spans)
}

// Cache TTLs of the suite's instances: gateway serve's defaults.
const (
	suiteSeriesTTL = 2 * time.Second
	suiteLayoutTTL = time.Minute
)

// NewGateway serves one instance over store with the pyramid p, the
// layout configuration cfg and clock, assembled by package gateway as
// gateway serve assembles it (the series cache, layout administration
// with its tracker and blocked list, the guarded engine, the write path).
func NewGateway(t *testing.T, store tiers.Store, p tiers.Pyramid, cfg layouts.Config, clock *querytest.Clock) *Gateway {
	t.Helper()
	env := querytest.NewEnv(t, store, querytest.Options{Pyramid: p, Clock: clock, Configure: func(c *gateway.Config) {
		c.Layouts = cfg
		c.SeriesTTL, c.LayoutTTL = suiteSeriesTTL, suiteLayoutTTL
	}})
	return &Gateway{Server: Serve(t, env), Layouts: env.Gateway.Layouts}
}

// pointsBody is a write body of the points of one series.
func pointsBody(series string, ts []int64, v func(int64) float64) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf(`{"series":%q,"t":%d,"v":%v}`, series, t, v(t))
	}
	return `{"points":[` + strings.Join(parts, ",") + `]}`
}

// write writes the points through g and records them in truth.
func (g *Gateway) write(t *testing.T, truth querytest.Truth, series string, ts []int64, v func(int64) float64) {
	t.Helper()
	status, _, body := g.Do("POST", "/v1/points", "application/json", pointsBody(series, ts, v))
	if status != 200 {
		t.Fatalf("write: %d %s", status, body)
	}
	for _, x := range ts {
		truth[x] = v(x)
	}
}

// readAll reads [from, to) raw through g, following cursors with limit (0:
// one request without a limit), and returns the points.
func (g *Gateway) readAll(t *testing.T, series string, from, to int64, limit int, desc bool) [][2]float64 {
	t.Helper()
	kv := []string{"from", fmt.Sprint(from), "to", fmt.Sprint(to), "resolution", "raw", "limit", "100000"}
	if limit > 0 {
		kv[len(kv)-1] = fmt.Sprint(limit)
	}
	if desc {
		kv = append(kv, "order", "desc")
	}
	var out [][2]float64
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("paging does not end")
		}
		q := Query(kv...)
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		var a Answer
		if st := g.Get("/v1/series/"+series+"/points?"+q, &a); st != 200 {
			t.Fatalf("read page %d: status %d", page, st)
		}
		if a.Partial {
			t.Fatalf("read page %d: partial (%s)", page, a.Reason)
		}
		for _, p := range a.Points {
			out = append(out, [2]float64{p[0], p[1]})
		}
		if a.NextCursor == "" {
			return out
		}
		if limit == 0 {
			t.Fatalf("a read without limit has a next page")
		}
		cursor = a.NextCursor
	}
}

// checkReads compares reads of [from, to) — both orders, with each of
// limits (0: unpaged; default 0 and 100) — with the brute-force truth.
func checkReads(t *testing.T, g *Gateway, series string, truth querytest.Truth, from, to int64, limits ...int) {
	t.Helper()
	var want [][2]float64
	for _, r := range truth.Points(tiers.Span{From: from, To: to}) {
		want = append(want, [2]float64{float64(r.T), r.Value()})
	}
	if len(want) == 0 {
		t.Fatal("the truth is empty: the test checks nothing")
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if len(limits) == 0 {
		limits = []int{0, 100}
	}
	for _, limit := range limits {
		for _, desc := range []bool{false, true} {
			got := g.readAll(t, series, from, to, limit, desc)
			w := want
			if desc {
				w = rev
			}
			if !slices.Equal(got, w) {
				t.Fatalf("limit %d desc %v: %d points differ from the %d written (first difference at %d)",
					limit, desc, len(got), len(w), firstDiff(got, w))
			}
		}
	}
}

func firstDiff(a, b [][2]float64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

type layoutAnswer struct {
	ID      string `json:"id"`
	Layouts []struct {
		Since        int64 `json:"since"`
		BucketMs     int64 `json:"bucket_ms"`
		EventBuckets int   `json:"event_buckets"`
	} `json:"layouts"`
}

func (l layoutAnswer) String() string {
	var parts []string
	for _, e := range l.Layouts {
		parts = append(parts, fmt.Sprintf("%d:%s×%d", e.Since, tiers.FormatDuration(e.BucketMs), e.EventBuckets))
	}
	return strings.Join(parts, " ")
}

// plannedPartitions is the partition count /plan gives for a raw read.
func plannedPartitions(t *testing.T, g *Gateway, series string, from, to int64) int {
	t.Helper()
	var p struct {
		Partitions int `json:"partitions"`
	}
	if st := g.Get("/v1/series/"+series+"/plan?"+Query("from", fmt.Sprint(from), "to", fmt.Sprint(to), "resolution", "raw"), &p); st != 200 {
		t.Fatalf("plan: %d", st)
	}
	return p.Partitions
}

// Two instances share a store. One changes a series' layout; both keep
// writing across the change (on time, late and overwrites), and every read
// across it — both orders, unpaged and paged, on either instance — returns
// exactly the points written.
func layoutChangeKeepsEveryPoint(t *testing.T, store tiers.Store) {
	p := tiers.DefaultPyramid()
	p[tiers.LevelRaw].BucketWidth, p[tiers.LevelRaw].EventBuckets = 10*tiers.Minute, 2
	clock := querytest.NewClock(querytest.Start())
	a := NewGateway(t, store, p, layouts.DefaultConfig(), clock)
	b := NewGateway(t, store, p, layouts.DefaultConfig(), clock)
	const series = "layout.change"
	truth := querytest.Truth{}
	value := func(ts int64) float64 { return float64(ts%100000) / 4 }
	start := clock.Now().UnixMilli() - 2*tiers.Hour
	var ts []int64
	for x := start; x < clock.Now().UnixMilli(); x += 10 * tiers.Second {
		ts = append(ts, x)
	}
	a.write(t, truth, series, ts, value)
	// b reads now, so that its caches hold the old layout when a changes it.
	checkReads(t, b, series, truth, start, clock.Now().UnixMilli()+1)

	now := clock.Now().UnixMilli()
	since := tiers.AlignDown(now+15*tiers.Minute, 10*tiers.Minute) + 10*tiers.Minute
	var changed layoutAnswer
	status, _, body := a.Do("PUT", "/v1/admin/series/"+series+"/layout", "application/json",
		fmt.Sprintf(`{"since":%d,"bucket_ms":%d,"event_buckets":3}`, since, 5*tiers.Minute))
	if status != 200 {
		t.Fatalf("layout change: %d %s", status, body)
	}
	if err := json.Unmarshal(body, &changed); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("0:10m×2 %d:5m×3", since)
	for _, g := range []*Gateway{a, b} {
		var got layoutAnswer
		if st := g.Get("/v1/series/"+series+"/layout", &got); st != 200 || got.String() != want || got.ID != series {
			t.Fatalf("layout = %d %q, want %q", st, got.String(), want)
		}
	}
	if changed.String() != want {
		t.Fatalf("PUT answered %q, want %q", changed.String(), want)
	}

	// Both instances write a minute of points at a time until 40 minutes
	// after the change, rewriting a few older points as they go.
	gw := []*Gateway{a, b}
	for i := 0; clock.Now().UnixMilli() < since+40*tiers.Minute; i++ {
		clock.Advance(time.Minute)
		n := clock.Now().UnixMilli()
		var batch []int64
		for x := n - tiers.Minute; x < n; x += 10 * tiers.Second {
			batch = append(batch, x)
		}
		batch = append(batch, n-5*tiers.Minute+3) // an on-time rewrite or new point, a few minutes back
		v := func(ts int64) float64 { return float64(ts%1000) + float64(i) }
		gw[i%2].write(t, truth, series, batch, v)
	}
	// Late points (older than the lateness) on both sides of the change.
	late := []int64{since - 3*tiers.Minute + 7, since + 3*tiers.Minute + 11, since - 7*tiers.Minute}
	b.write(t, truth, series, late, func(ts int64) float64 { return -float64(ts % 977) })

	end := clock.Now().UnixMilli() + 1
	checkReads(t, a, series, truth, start, end, 0, 7, 100, 1000)
	checkReads(t, b, series, truth, start, end, 0, 33)
	// Ranges that start or end at the change, and one around it.
	checkReads(t, a, series, truth, since, end)
	checkReads(t, b, series, truth, start, since)
	checkReads(t, a, series, truth, since-4*tiers.Minute-1, since+4*tiers.Minute+1)

	// Reads enumerate the new layout from the change on.
	for _, c := range []struct {
		from, to int64
		want     int
	}{
		{since - 10*tiers.Minute, since, 2},
		{since, since + 5*tiers.Minute, 3},
		{since - 10*tiers.Minute, since + 10*tiers.Minute, 2 + 2*3},
	} {
		if got := plannedPartitions(t, a, series, c.from, c.to); got != c.want {
			t.Errorf("plan of [%d, %d): %d partitions, want %d", c.from-since, c.to-since, got, c.want)
		}
	}
}

// A layout change that could move a written point, or that another
// instance could still write past, is a 400 naming since; other bad
// fields name themselves; an unknown series is a 404.
func layoutChangeValidation(t *testing.T, store tiers.Store) {
	p := tiers.DefaultPyramid()
	p[tiers.LevelRaw].BucketWidth, p[tiers.LevelRaw].EventBuckets = 10*tiers.Minute, 2
	// 7m past a half hour: the earliest valid since is the next half hour
	// after now + 15m.
	clock := querytest.NewClock(time.UnixMilli(tiers.AlignDown(querytest.Start().UnixMilli(), 30*tiers.Minute) + 7*tiers.Minute + 123))
	g := NewGateway(t, store, p, layouts.DefaultConfig(), clock)
	now := clock.Now().UnixMilli()
	g.write(t, querytest.Truth{}, "layout.valid", []int64{now - tiers.Minute, now + 2*tiers.Minute}, func(int64) float64 { return 1 })
	next := now - 7*tiers.Minute - 123 + 30*tiers.Minute
	for _, c := range []struct {
		body, param string
	}{
		{fmt.Sprintf(`{"since":%d,"bucket_ms":600000,"event_buckets":4}`, tiers.AlignUp(now, 10*tiers.Minute)), "since"}, // too soon
		{fmt.Sprintf(`{"since":%d,"bucket_ms":600000,"event_buckets":4}`, next+tiers.Minute), "since"},                   // not a boundary
		{fmt.Sprintf(`{"since":%d,"bucket_ms":900000,"event_buckets":4}`, next+15*tiers.Minute), "since"},                // boundary of the new width only
		{fmt.Sprintf(`{"since":%d,"bucket_ms":999,"event_buckets":4}`, next), "bucket_ms"},                               // below 1s
		{fmt.Sprintf(`{"since":%d,"bucket_ms":600000,"event_buckets":0}`, next), "event_buckets"},                        // none
		{fmt.Sprintf(`{"since":%d,"bucket_ms":600000,"event_buckets":65}`, next), "event_buckets"},                       // over the maximum
		{`{"bucket_ms":600000,"event_buckets":4}`, "since"},                                                              // missing
		{`{"since":1,"bucket_ms":600000,"event_buckets":4,"extra":1}`, "extra"},                                          // unknown member
		{`not json`, "body"},
	} {
		status, ct, body := g.Do("PUT", "/v1/admin/series/layout.valid/layout", "application/json", c.body)
		var pr Problem
		_ = json.Unmarshal(body, &pr)
		if status != 400 || ct != "application/problem+json" || len(pr.Errors) == 0 || pr.Errors[0].Param != c.param {
			t.Errorf("%s: %d %s, want 400 naming %s", c.body, status, body, c.param)
		}
	}
	// The refusal of a too-early since tells the earliest valid one, which
	// is then accepted.
	status, _, body := g.Do("PUT", "/v1/admin/series/layout.valid/layout", "application/json",
		fmt.Sprintf(`{"since":%d,"bucket_ms":1800000,"event_buckets":4}`, now))
	var pr Problem
	_ = json.Unmarshal(body, &pr)
	var earliest int64
	if i := strings.LastIndex(pr.Detail, "is "); status != 400 || i < 0 {
		t.Fatalf("%d %s", status, body)
	} else if _, err := fmt.Sscan(pr.Detail[i+3:], &earliest); err != nil || earliest != next {
		t.Fatalf("earliest since %d (%v), want %d: %s", earliest, err, next, pr.Detail)
	}
	if status, _, body := g.Do("PUT", "/v1/admin/series/layout.valid/layout", "application/json",
		fmt.Sprintf(`{"since":%d,"bucket_ms":1800000,"event_buckets":4}`, earliest)); status != 200 {
		t.Fatalf("earliest since refused: %d %s", status, body)
	}
	// A second change must come after the first.
	if status, _, _ := g.Do("PUT", "/v1/admin/series/layout.valid/layout", "application/json",
		fmt.Sprintf(`{"since":%d,"bucket_ms":1800000,"event_buckets":8}`, earliest)); status != 400 {
		t.Fatalf("a change at the pending one's since: %d", status)
	}
	for path, want := range map[string]int{
		"/v1/series/nobody.here/layout":        404,
		"/v1/series/bad%20id/layout":           400,
		"/v1/admin/partitions/wide?limit=0":    400,
		"/v1/admin/partitions/wide?limit=1001": 400,
		"/v1/admin/partitions/wide?limit=abc":  400,
		"/v1/admin/partitions/wide?limit=5":    200,
		"/v1/admin/blocked":                    200,
		"/v1/series/layout.valid/layout":       200,
	} {
		if st, _, body := g.Do("GET", path, "", ""); st != want {
			t.Errorf("GET %s: %d %s, want %d", path, st, body, want)
		}
	}
	if st, _, _ := g.Do("PUT", "/v1/admin/series/nobody.here/layout", "application/json",
		fmt.Sprintf(`{"since":%d,"bucket_ms":600000,"event_buckets":4}`, next)); st != 404 {
		t.Errorf("layout of an unknown series: %d, want 404", st)
	}
	for _, body := range []string{`{}`, `{"reason":""}`, `{"reason":"` + strings.Repeat("x", 501) + `"}`, `{"reason":3}`} {
		if st, _, b := g.Do("PUT", "/v1/admin/series/layout.valid/blocked", "application/json", body); st != 400 {
			t.Errorf("block with %s: %d %s", body, st, b)
		}
	}
}

// A series written faster than the wide-partition limit allows is split
// by the gateway itself from the next possible boundary; its later
// partitions stay under the limit and every point stays readable.
func autoSplitKeepsPartitionsUnderTheLimit(t *testing.T, store tiers.Store) {
	p := tiers.DefaultPyramid()
	p[tiers.LevelRaw].BucketWidth, p[tiers.LevelRaw].EventBuckets = tiers.Minute, 1
	cfg := layouts.DefaultConfig()
	cfg.WideRows, cfg.AutoSplit, cfg.MaxEventBuckets = 200, true, 8
	// Minute-aligned, so that each batch fills one partition of the
	// one-minute buckets.
	clock := querytest.NewClock(time.UnixMilli(tiers.AlignDown(querytest.Start().UnixMilli(), tiers.Minute)))
	g := NewGateway(t, store, p, cfg, clock)
	const series = "split.busy"
	truth := querytest.Truth{}
	start := clock.Now().UnixMilli()
	// 5 points a second: 300 rows in each one-minute partition.
	for clock.Now().UnixMilli() < start+45*tiers.Minute {
		clock.Advance(time.Minute)
		n := clock.Now().UnixMilli()
		var batch []int64
		for x := n - tiers.Minute; x < n; x += 200 {
			batch = append(batch, x)
		}
		g.write(t, truth, series, batch, func(ts int64) float64 { return float64(ts % 7919) })
	}
	end := clock.Now().UnixMilli()

	var l layoutAnswer
	if st := g.Get("/v1/series/"+series+"/layout", &l); st != 200 || len(l.Layouts) != 2 {
		t.Fatalf("layout after the split: %d %s", st, l)
	}
	split := l.Layouts[1]
	if l.Layouts[0].EventBuckets != 1 || split.EventBuckets != 2 || split.BucketMs != tiers.Minute {
		t.Fatalf("layout after the split: %s, want 1 then 2 event buckets of 1m", l)
	}
	// The first batch fills the first partition over the limit at start +
	// 1m; the split starts at the first boundary later than that + 15m.
	if split.Since != start+17*tiers.Minute {
		t.Fatalf("split since start + %s, want start + 17m", tiers.FormatDuration(split.Since-start))
	}

	checkReads(t, g, series, truth, start-1, end+1, 0, 997, 5000)

	var wide struct {
		Partitions []struct {
			Series        string `json:"series"`
			Bucket        int64  `json:"bucket"`
			EventBucket   int    `json:"event_bucket"`
			Rows          int64  `json:"rows"`
			BytesEstimate int64  `json:"bytes_estimate"`
		} `json:"partitions"`
	}
	if st := g.Get("/v1/admin/partitions/wide?limit=1000", &wide); st != 200 {
		t.Fatalf("wide partitions: %d", st)
	}
	before, after := 0, 0
	for i, w := range wide.Partitions {
		if i > 0 && w.Rows > wide.Partitions[i-1].Rows {
			t.Fatalf("not widest first at %d", i)
		}
		if w.BytesEstimate != w.Rows*layouts.RawRowBytes {
			t.Fatalf("bytes estimate %d for %d rows", w.BytesEstimate, w.Rows)
		}
		if w.Series != series {
			continue
		}
		if w.Bucket < split.Since {
			before++
			if w.Rows != 300 || w.EventBucket != 0 {
				t.Errorf("partition %d/%d before the split: %d rows, want 300", w.Bucket, w.EventBucket, w.Rows)
			}
			continue
		}
		after++
		if w.Rows > cfg.WideRows {
			t.Errorf("partition %d/%d after the split: %d rows, over the limit of %d", w.Bucket, w.EventBucket, w.Rows, cfg.WideRows)
		}
	}
	wantAfter := int((end-split.Since)/tiers.Minute) * 2
	wantBefore := int((split.Since - start) / tiers.Minute)
	if before != wantBefore || after != wantAfter {
		t.Fatalf("%d partitions before the split and %d after, want %d and %d", before, after, wantBefore, wantAfter)
	}
	metrics := g.metrics(t)
	for _, want := range []string{`tsgate_layout_changes_total{source="auto_split"} 1`, fmt.Sprintf("tsgate_wide_partitions_total %d", wantBefore)} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func (g *Gateway) metrics(t *testing.T) string {
	t.Helper()
	st, _, body := g.Do("GET", "/metrics", "", "")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	return string(body)
}

// A blocked series is refused on every read and in every write batch,
// without a single partition read or write reaching the store, by the
// instance that blocked it at once and by another within the series cache
// TTL; unblocking restores it.
func blockedSeriesNeverReachTheirPartitions(t *testing.T, store tiers.Store) {
	counting := NewCounting(store)
	clock := querytest.NewClock(querytest.Start())
	p := tiers.DefaultPyramid()
	a := NewGateway(t, counting, p, layouts.DefaultConfig(), clock)
	b := NewGateway(t, counting, p, layouts.DefaultConfig(), clock)
	now := clock.Now().UnixMilli()
	truthX, truthY := querytest.Truth{}, querytest.Truth{}
	ts := []int64{now - 3*tiers.Minute, now - 2*tiers.Minute, now - tiers.Minute}
	one := func(int64) float64 { return 1 }
	a.write(t, truthX, "blk.x", ts, one)
	a.write(t, truthY, "blk.y", ts, one)
	checkReads(t, b, "blk.x", truthX, now-tiers.Hour, now+1) // b caches "nothing is blocked"

	status, _, body := a.Do("PUT", "/v1/admin/series/blk.x/blocked", "application/json", `{"reason":"runaway producer"}`)
	var blk struct {
		Series, Reason string
		Since          int64
	}
	if err := json.Unmarshal(body, &blk); status != 200 || err != nil || blk.Series != "blk.x" || blk.Reason != "runaway producer" || blk.Since != now {
		t.Fatalf("block: %d %s", status, body)
	}
	// b still serves the series within its TTL.
	if st := b.Get("/v1/series/blk.x/points?"+Query("from", fmt.Sprint(now-tiers.Hour), "to", fmt.Sprint(now+1), "resolution", "raw"), nil); st != 200 {
		t.Fatalf("b read within its TTL: %d", st)
	}
	clock.Advance(suiteSeriesTTL)
	now = clock.Now().UnixMilli()
	counting.Reset()

	span := Query("from", fmt.Sprint(now-tiers.Hour), "to", fmt.Sprint(now+1))
	for _, g := range []*Gateway{a, b} {
		for _, path := range []string{
			"/v1/series/blk.x/points?" + span + "&resolution=raw",
			"/v1/series/blk.x/points?" + span + "&resolution=1m",
			"/v1/series/blk.x/plan?" + span,
		} {
			st, ct, body := g.Do("GET", path, "", "")
			var pr struct {
				Problem
				Series string `json:"series"`
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(body, &pr)
			if st != 403 || ct != "application/problem+json" || pr.Series != "blk.x" || pr.Reason != "runaway producer" ||
				!strings.Contains(pr.Detail, "blk.x") || !strings.Contains(pr.Detail, "runaway producer") {
				t.Errorf("GET %s: %d %s", path, st, body)
			}
		}
		// A batch query fails only the blocked series' result.
		st, _, body := g.Do("POST", "/v1/query", "application/json",
			fmt.Sprintf(`{"from":%d,"to":%d,"resolution":"raw","queries":[{"series":"blk.x"},{"series":"blk.y"}]}`, now-tiers.Hour, now+1))
		var bq struct {
			Results []struct {
				Points [][]float64 `json:"points"`
				Error  *Problem    `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &bq); st != 200 || err != nil || len(bq.Results) != 2 ||
			bq.Results[0].Error == nil || bq.Results[0].Error.Status != 403 || bq.Results[1].Error != nil || len(bq.Results[1].Points) != 3 {
			t.Errorf("batch query: %d %s", st, body)
		}
		// A write batch holding it is refused whole, one entry per point.
		st, _, body = g.Do("POST", "/v1/points", "application/json",
			fmt.Sprintf(`{"points":[{"series":"blk.x","t":%d,"v":2},{"series":"blk.y","t":%d,"v":2},{"series":"blk.x","t":%d,"v":2}]}`, now-10, now-10, now-20))
		var pr Problem
		_ = json.Unmarshal(body, &pr)
		if st != 400 || len(pr.Errors) != 2 || pr.Errors[0].Param != "points[0].series" || pr.Errors[1].Param != "points[2].series" ||
			!strings.Contains(pr.Errors[0].Message, "runaway producer") {
			t.Errorf("write batch with a blocked series: %d %s", st, body)
		}
	}
	if r, w, n := counting.Touched("blk.x"); r+w+n != 0 {
		t.Fatalf("the blocked series reached the store: %d partition reads, %d partition writes, %d registry notes", r, w, n)
	}
	if _, w, n := counting.Touched("blk.y"); w+n != 0 {
		t.Fatalf("a refused batch wrote its other series: %d partition writes, %d registry notes", w, n)
	}
	checkReads(t, a, "blk.y", truthY, now-tiers.Hour, now+1)

	var list struct {
		Blocked []struct {
			Series, Reason string
		} `json:"blocked"`
	}
	if st := b.Get("/v1/admin/blocked", &list); st != 200 || len(list.Blocked) != 1 || list.Blocked[0].Series != "blk.x" {
		t.Fatalf("blocked list: %d %+v", st, list)
	}
	for _, want := range []string{`tsgate_blocked_refusals_total{path="read"} 4`, `tsgate_blocked_refusals_total{path="write"} 1`} {
		if m := a.metrics(t); !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s (4 refused reads, 1 refused batch)", want)
		}
	}

	if st, _, body := b.Do("DELETE", "/v1/admin/series/blk.x/blocked", "", ""); st != 204 {
		t.Fatalf("unblock: %d %s", st, body)
	}
	checkReads(t, b, "blk.x", truthX, now-tiers.Hour, now+1) // at once on the instance that unblocked
	clock.Advance(suiteSeriesTTL)
	a.write(t, truthX, "blk.x", []int64{now - 30}, one) // and on the other after its TTL
	checkReads(t, a, "blk.x", truthX, now-tiers.Hour, now+1)
	if st := a.Get("/v1/admin/blocked", &list); st != 200 || len(list.Blocked) != 0 {
		t.Fatalf("blocked list after unblocking: %d %+v", st, list)
	}
}
