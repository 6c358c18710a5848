package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkWarmRead reads 2 days of final raw 1 Hz points (172,800 points,
// 48 hour buckets × 4 event buckets) through the HTTP handler over the
// embedded store with the cache of final buckets, following cursors of
// 100,000 points: once the buckets are cached, the read is memory and
// JSON encoding only. Profile it with -cpuprofile / -memprofile.
func BenchmarkWarmRead(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(b, store, querytest.Options{Configure: func(c *gateway.Config) { c.CacheBytes = 256 << 20 }})
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), tiers.Hour) - tiers.Day
	from := end - 2*tiers.Day
	backfill(b, env, "warm", tiers.Span{From: from, To: end}, 1000, func(t int64) float64 { return float64(t%100000) / 8 })
	h := env.Gateway.Handler()
	read := func() (points int64) {
		cursor := ""
		for {
			u := fmt.Sprintf("/v1/series/warm/points?from=%d&to=%d&resolution=raw&limit=100000", from, end)
			if cursor != "" {
				u += "&cursor=" + cursor
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			tr := (&tailWriter{buf: w.Body.Bytes()}).object()
			var t struct {
				NextCursor string `json:"next_cursor"`
				Stats      struct {
					RowsRead int64 `json:"rows_read"`
				} `json:"stats"`
			}
			if err := jsonUnmarshal(tr, &t); err != nil {
				b.Fatal(err)
			}
			points += t.Stats.RowsRead
			if t.NextCursor == "" {
				return points
			}
			cursor = urlEscape(t.NextCursor)
		}
	}
	read() // fill the cache
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n = read()
	}
	b.ReportMetric(float64(n), "points")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
func urlEscape(s string) string           { return url.QueryEscape(s) }

// BenchmarkWarmHourRead reads 90 days of the hour tier (2,160 windows of
// min, max, avg and count, from 1/min points rolled up) through the HTTP
// handler with every bucket cached: what remains is per-request work and
// the encoding of the windows.
func BenchmarkWarmHourRead(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 130 * tiers.Day
	p[1].Retention = 130 * tiers.Day
	env := querytest.NewEnv(b, store, querytest.Options{Pyramid: p, Configure: func(c *gateway.Config) { c.CacheBytes = 256 << 20 }})
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), p[2].BucketWidth)
	from := end - 90*tiers.Day
	backfill(b, env, "hours", tiers.Span{From: from, To: end}, tiers.Minute, func(t int64) float64 { return float64(t%100000) / 7 })
	env.Clock.Advance(5 * time.Minute)
	if _, err := env.Rollups.RunOnce(context.Background(), true); err != nil {
		b.Fatal(err)
	}
	// Past the raw retention no late point can correct the rollups: their
	// buckets are final.
	env.Clock.Advance(131 * 24 * time.Hour)
	h := env.Gateway.Handler()
	u := fmt.Sprintf("/v1/series/hours/points?from=%d&to=%d&resolution=1h&agg=min,max,avg,count", from, end)
	read := func() (hits int64) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		var t struct {
			Points [][]float64 `json:"points"`
			Stats  struct {
				CacheHits int64 `json:"cache_hits"`
			} `json:"stats"`
		}
		if err := jsonUnmarshal(w.Body.Bytes(), &t); err != nil {
			b.Fatal(err)
		}
		if len(t.Points) != 90*24 {
			b.Fatalf("%d windows, want %d", len(t.Points), 90*24)
		}
		return t.Stats.CacheHits
	}
	read() // fill the cache
	if hits := read(); hits == 0 {
		b.Fatal("the hour tier's buckets are not served from the cache")
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
	}
}

// backfill writes one point of series every step over span, with value
// v(t), through the writer's backfill path.
func backfill(b *testing.B, env *querytest.Env, series string, span tiers.Span, step int64, v func(t int64) float64) {
	b.Helper()
	querytest.Backfill(b, env.Writer, series, span, step, v)
}

// BenchmarkColdMinuteRead reads a 7-day panel (about 1,000 windows of
// min, max and avg from the minute tier, 10 s points rolled up) through
// the HTTP handler of a gateway just started over the store, so that no
// bucket is cached yet and every bucket read fills the cache: what a
// dashboard's first look costs, minus the store's own caches.
func BenchmarkColdMinuteRead(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	clock := querytest.NewClock(querytest.Start())
	configure := func(c *gateway.Config) { c.CacheBytes = 256 << 20 }
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 8 * tiers.Day
	env := querytest.NewEnv(b, store, querytest.Options{Pyramid: p, Clock: clock, Configure: configure})
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), tiers.Hour) - tiers.Hour
	from := end - 7*tiers.Day
	backfill(b, env, "minutes", tiers.Span{From: from, To: end}, 10*tiers.Second, func(t int64) float64 { return float64(t%100003) / 7 })
	env.Clock.Advance(5 * time.Minute)
	if _, err := env.Rollups.RunOnce(context.Background(), true); err != nil {
		b.Fatal(err)
	}
	// Past the raw retention the minute rows are final: cacheable.
	env.Clock.Advance(9 * 24 * time.Hour)
	env.Gateway.Close()
	u := fmt.Sprintf("/v1/series/minutes/points?from=%d&to=%d&max_points=1000&agg=min,max,avg", from, end)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		cold := querytest.NewEnv(b, store, querytest.Options{Pyramid: p, Clock: clock, Configure: configure})
		h := cold.Gateway.Handler()
		b.StartTimer()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
		b.StopTimer()
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		var t struct {
			Resolution string      `json:"resolution"`
			Points     [][]float64 `json:"points"`
		}
		if err := jsonUnmarshal(w.Body.Bytes(), &t); err != nil {
			b.Fatal(err)
		}
		if len(t.Points) < 500 {
			b.Fatalf("%d windows at %s", len(t.Points), t.Resolution)
		}
		cold.Gateway.Close()
		b.StartTimer()
	}
}

// BenchmarkPercentile90Days reads the p99 of a 90-day panel of latencies
// (log-normal, a point every 30 s: 259,200 points; raw kept 130 days so
// that both ways are possible), about 1,000 windows: from the hour tier's
// sketches (GET …/points?max_points=1000&agg=p99) and exactly, by a
// client that reads the raw points (resolution=raw, following cursors)
// and sorts each window's. Both caches are off: every read goes to the
// store. The answers are first checked to agree within 1 % (the sketch's
// quantile is the order statistic at rank ⌊q·(n-1)⌋).
func BenchmarkPercentile90Days(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p := tiers.DefaultPyramid()
	p.Raw().Retention, p[1].Retention = 130*tiers.Day, 130*tiers.Day
	env := querytest.NewEnv(b, store, querytest.Options{Pyramid: p, Configure: func(c *gateway.Config) { c.Query.MaxPartitions = 100_000 }})
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), p[2].BucketWidth)
	from := end - 90*tiers.Day
	r := rand.New(rand.NewPCG(3, 4))
	backfill(b, env, "latency", tiers.Span{From: from, To: end}, 30*tiers.Second, func(int64) float64 {
		return math.Round(math.Exp(r.NormFloat64()*1.2+3)*1000) / 1000
	})
	env.Clock.Advance(5 * time.Minute)
	if _, err := env.Rollups.RunOnce(context.Background(), true); err != nil {
		b.Fatal(err)
	}
	h := env.Gateway.Handler()
	get := func(u string, v any) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", u, nil))
		if w.Code != 200 {
			b.Fatalf("%s: %d %s", u, w.Code, w.Body)
		}
		if err := jsonUnmarshal(w.Body.Bytes(), v); err != nil {
			b.Fatal(err)
		}
	}
	type answer struct {
		Resolution int64       `json:"resolution_ms"`
		Points     [][]float64 `json:"points"`
		NextCursor string      `json:"next_cursor"`
	}
	sketches := func() answer {
		var a answer
		get(fmt.Sprintf("/v1/series/latency/points?from=%d&to=%d&max_points=1000&agg=p99", from, end), &a)
		return a
	}
	exact := func(width int64) map[int64]float64 {
		windows := map[int64][]float64{}
		cursor := ""
		for {
			u := fmt.Sprintf("/v1/series/latency/points?from=%d&to=%d&resolution=raw&limit=100000", from, end)
			if cursor != "" {
				u += "&cursor=" + urlEscape(cursor)
			}
			var a answer
			get(u, &a)
			for _, pt := range a.Points {
				k := tiers.AlignDown(int64(pt[0]), width)
				windows[k] = append(windows[k], pt[1])
			}
			if cursor = a.NextCursor; cursor == "" {
				break
			}
		}
		out := make(map[int64]float64, len(windows))
		for k, vs := range windows {
			slices.Sort(vs)
			out[k] = vs[int(0.99*float64(len(vs)-1))]
		}
		return out
	}
	a := sketches()
	want := exact(a.Resolution)
	if len(a.Points) < 500 || len(a.Points) != len(want) {
		b.Fatalf("%d windows of %d ms from the sketches, %d exact", len(a.Points), a.Resolution, len(want))
	}
	for _, pt := range a.Points {
		if w := want[int64(pt[0])]; !(math.Abs(pt[1]-w) <= 0.01*w) {
			b.Fatalf("p99 of the window at %d: %v from the sketches, %v exact", int64(pt[0]), pt[1], w)
		}
	}
	b.Run("sketches", func(b *testing.B) {
		for b.Loop() {
			sketches()
		}
	})
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			exact(a.Resolution)
		}
	})
}
