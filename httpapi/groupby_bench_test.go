package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// BenchmarkGroupBy sums 1,000 series of 7 days into 4 groups at
// max_points=1000 (15-minute windows from the minute tier) three ways,
// on an in-memory embedded store with both caches off, so that every way
// reads the same 7,000 minute partitions from Pebble:
//
//   - gateway: one GET /v1/points?match=&group_by=job;
//   - ideal: the partitions read straight from the store, 8 at a time,
//     rows folded into the groups' windows — no planning, no HTTP;
//   - client: what a client without group_by does, one GET per series
//     (8 at a time) through the same handler, summing the answers.
//
// Series have a point every 5 minutes (2,016 each, 2.0 M in all), rolled up.
func BenchmarkGroupBy(b *testing.B) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	env := querytest.NewEnv(b, store, querytest.Options{Configure: func(c *gateway.Config) {
		c.CacheBytes, c.ResultsCacheBytes = 0, 0
		c.Pyramid[0].Retention = 9 * tiers.Day
		// A point every 5 minutes fills hour buckets of 4 event buckets
		// with 3 rows each: day buckets keep the load (and its rollup) to
		// 7,000 raw partitions. The reads compared are of the minute tier.
		c.Pyramid[0].BucketWidth, c.Pyramid[0].EventBuckets = tiers.Day, 1
		c.Query.MaxPartitions = 100_000
	}})
	const nSeries = 1000
	end := tiers.AlignDown(env.Clock.Now().UnixMilli(), tiers.Day) - tiers.Day
	span := tiers.Span{From: end - 7*tiers.Day, To: end}
	ctx := context.Background()
	ids := make([]string, nSeries)
	loadStart := time.Now()
	for lo := 0; lo < nSeries; lo += 100 {
		var batch ingest.Batch
		batch.Labels = map[string]tiers.Labels{}
		for i := lo; i < lo+100; i++ {
			ids[i] = fmt.Sprintf("gb.cpu.%04d", i)
			batch.Labels[ids[i]] = tiers.Labels{"__name__": "gb_cpu", "job": fmt.Sprint("job", i%4), "host": fmt.Sprint("h", i)}
			for t := span.From + int64(i); t < span.To; t += 5 * tiers.Minute {
				batch.Points = append(batch.Points, ingest.Point{Series: ids[i], T: t, V: float64((t/tiers.Minute)%97) + float64(i%7)})
			}
		}
		if _, err := env.Writer.BackfillBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded in %v", time.Since(loadStart))
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		b.Fatal(err)
	}
	b.Logf("rolled up after %v", time.Since(loadStart))
	h := env.Gateway.Handler()
	get := func(u string, v any) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		if w.Code != 200 {
			b.Fatalf("%s: %d %s", u, w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
			b.Fatal(err)
		}
	}
	const window = 15 * tiers.Minute // what max_points=1000 picks over 7 days
	type answer struct {
		Results []struct {
			Group   map[string]string `json:"group"`
			Columns []string          `json:"columns"`
			Points  [][]float64       `json:"points"`
			Tier    string            `json:"tier"`
		} `json:"results"`
		Tier   string      `json:"tier"`
		Points [][]float64 `json:"points"`
	}
	gateway := func() map[string]map[int64]float64 {
		var a answer
		get(fmt.Sprintf("/v1/points?match=gb_cpu&group_by=job&from=%d&to=%d&max_points=1000&agg=sum&limit=100000", span.From, span.To), &a)
		out := map[string]map[int64]float64{}
		for _, r := range a.Results {
			if r.Tier != "minute" {
				b.Fatalf("group_by read the %s tier", r.Tier)
			}
			m := map[int64]float64{}
			for _, p := range r.Points {
				m[int64(p[0])] = p[1]
			}
			out[r.Group["job"]] = m
		}
		return out
	}
	client := func() map[string]map[int64]float64 {
		out := map[string]map[int64]float64{}
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(8)
		for i, id := range ids {
			g.Go(func() error {
				var a answer
				get(fmt.Sprintf("/v1/series/%s/points?from=%d&to=%d&resolution=15m&agg=sum&limit=100000", id, span.From, span.To), &a)
				mu.Lock()
				defer mu.Unlock()
				job := fmt.Sprint("job", i%4)
				if out[job] == nil {
					out[job] = map[int64]float64{}
				}
				for _, p := range a.Points {
					out[job][int64(p[0])] += p[1]
				}
				return nil
			})
		}
		_ = g.Wait()
		return out
	}
	minute := env.Pyramid.Tier(1)
	ideal := func() map[string]map[int64]float64 {
		sums := make([]map[int64]float64, 4)
		var mu [4]sync.Mutex
		for j := range sums {
			sums[j] = map[int64]float64{}
		}
		var g errgroup.Group
		g.SetLimit(8)
		for i, id := range ids {
			for bk := range minute.DefaultLayout().Buckets(span, false) {
				g.Go(func() error {
					pages := store.Read(ctx, tiers.ReadRequest{Key: tiers.PartitionKey{Table: minute.Table, Series: id, Bucket: bk.Start},
						Span: bk.Span().Intersect(span), PageSize: 5000})
					defer pages.Close()
					local := map[int64]float64{}
					for {
						rows, err := pages.Next()
						if errors.Is(err, tiers.ErrDone) {
							break
						}
						if err != nil {
							return err
						}
						for _, r := range rows {
							local[tiers.AlignDown(r.T, window)] += r.Sum
						}
					}
					mu[i%4].Lock()
					for t, v := range local {
						sums[i%4][t] += v
					}
					mu[i%4].Unlock()
					return nil
				})
			}
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		out := map[string]map[int64]float64{}
		for j, m := range sums {
			out[fmt.Sprint("job", j)] = m
		}
		return out
	}
	// The three agree before anything is timed.
	want := ideal()
	for name, got := range map[string]map[string]map[int64]float64{"gateway": gateway(), "client": client()} {
		if len(got) != 4 {
			b.Fatalf("%s: %d groups", name, len(got))
		}
		for job, m := range want {
			if len(got[job]) != len(m) {
				b.Fatalf("%s: %s has %d windows, want %d", name, job, len(got[job]), len(m))
			}
			for t, v := range m {
				if d := got[job][t] - v; d > 1e-6*max(1, v) || -d > 1e-6*max(1, v) {
					b.Fatalf("%s: %s at %d: %v, want %v", name, job, t, got[job][t], v)
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		run  func() map[string]map[int64]float64
	}{{"gateway", gateway}, {"ideal", ideal}, {"client", client}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
		})
	}
}
