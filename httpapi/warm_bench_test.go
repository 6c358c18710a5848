package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
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
