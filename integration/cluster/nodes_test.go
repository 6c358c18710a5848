//go:build cluster

package cluster

import (
	"fmt"
	"slices"
	"strings"

	"sync"
	"testing"
	"time"

	assembly "github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/testkit/storetest"
)

// TestOneNodeKilled kills a node (SIGKILL) while four writers load the
// gateway, then reads while it is still down.
func TestOneNodeKilled(t *testing.T) {
	now := storetest.Start().Truncate(time.Hour)
	gw := gateway(t, baseConfig(keyspace), now)
	start := now.Add(-6 * time.Hour).UnixMilli()
	const writers, batch = 4, 50

	// Every acknowledged write must be readable afterwards; a write that
	// fails during the outage must fail with 503 and succeed when retried.
	acked := make([][]point, writers)
	series := make([]string, writers)
	var mu sync.Mutex
	var unavailable, retriedOK int
	var bad []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		series[w] = uniq(fmt.Sprintf("kill-w%d", w))
		wg.Go(func() {
			// At most 5.5 h of points at 2 Hz: all in the past.
			for b := 0; (b+1)*batch <= 40000; b++ {
				select {
				case <-stop:
					return
				default:
				}
				pts := make([]point, batch)
				for i := range pts {
					n := b*batch + i
					pts[i] = point{start + int64(n)*500, float64(n % 1009)}
				}
				body := writeBody(series[w], pts)
				failed := false
				for attempt := 0; ; attempt++ {
					status, resp, err := call(gw, "POST", "/v1/points", body)
					if err == nil && status == 200 {
						acked[w] = append(acked[w], pts...)
						if failed {
							mu.Lock()
							retriedOK++
							mu.Unlock()
						}
						break
					}
					mu.Lock()
					if err == nil && status == 503 {
						unavailable++
					} else {
						bad = append(bad, fmt.Sprintf("status %d %s %v", status, resp, err))
					}
					mu.Unlock()
					if err != nil || status != 503 || attempt == 50 {
						return
					}
					failed = true
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	kill(t, 3)
	time.Sleep(6 * time.Second)
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d writes failed otherwise than with 503, e.g. %s", len(bad), bad[0])
	}
	total := 0
	for _, a := range acked {
		total += len(a)
	}
	t.Logf("%d points acknowledged in %d-point batches; %d answers 503 during the outage, %d batches succeeded on retry",
		total, batch, unavailable, retriedOK)

	t.Run("acknowledged writes are readable", func(t *testing.T) {
		for w, s := range series {
			got := readAll(t, gwList(gw), s, params("from", ms(start), "to", ms(now.UnixMilli()), "resolution", "raw", "limit", "100000", "partial", "deny"))
			sameRows(t, s, got, rawRows(acked[w]))
		}
	})

	t.Run("reads with one node down", func(t *testing.T) {
		s, pts := series[0], acked[0]
		from, to := start, now.UnixMilli()
		got := readAll(t, gwList(gw), s, params("from", ms(from), "to", ms(to), "resolution", "raw", "limit", "100000"))
		sameRows(t, "raw", got, rawRows(pts))
		got = readAll(t, gwList(gw), s, params("from", ms(from), "to", ms(to), "resolution", "10s", "agg", "min,max,sum,count", "limit", "100000"))
		sameRows(t, "10s windows", got, windowRows(pts, from, to, 10_000))
		got = readAll(t, gwList(gw), s, params("from", ms(from), "to", ms(to), "resolution", "raw", "limit", "97"))
		sameRows(t, "raw in pages of 97", got, rawRows(pts))
		// From the raw tier (no tier's step divides 30 s): the minute tier
		// holds late points only after a rollup run.
		got = readAll(t, gwList(gw), s, params("from", ms(from), "to", ms(to), "resolution", "30s", "agg", "min,max,sum,count", "limit", "7"))
		sameRows(t, "30s windows in pages of 7", got, windowRows(pts, from, to, 30_000))
	})
}

// TestTwoNodesDown kills two of three nodes: no quorum. Reads answer at
// once, partial with reason "unavailable" (partial=allow) or 503 (deny),
// writes get 503, /readyz says why; once the nodes are back, the same
// gateway answers completely again.
//
// The gateway caches final partitions, as `gateway serve` does by default:
// without quorum a read can only deliver what it has cached, and a page
// that can deliver nothing at all is a 503 even with partial=allow (its
// cursor would point where it started).
func TestTwoNodesDown(t *testing.T) {
	now := storetest.Start().Truncate(time.Hour)
	gw := gateway(t, baseConfig(keyspace), now, func(c *assembly.Config) { c.CacheBytes = 64 << 20 })
	s := uniq("quorum")
	from := now.Add(-3 * time.Hour).UnixMilli()
	pts := sawtooth(from, 10_000, 3*360)
	// Written on time, as they arrive in production: late points would go
	// to the late table, whose partitions are never final, never cached.
	for c := range slices.Chunk(pts, 60) {
		gw.SetClock(time.UnixMilli(c[len(c)-1].T + 1000))
		mustWrite(t, gw, s, c)
	}
	gw.SetClock(now)
	q := params("from", ms(from), "to", ms(now.UnixMilli()), "resolution", "raw", "limit", "100000")
	sameRows(t, "before", readAll(t, gwList(gw), s, q), rawRows(pts))

	kill(t, 2)
	kill(t, 3)
	// /readyz says not ready at once (its probe times out); the surviving
	// coordinator answers Unavailable once its failure detector has
	// convicted the dead nodes, and from then on every answer is prompt.
	d := waitFor(t, 60*time.Second, "/readyz to say not ready", func() error {
		status, body, err := call(gw, "GET", "/readyz", nil)
		if err != nil || status != 503 {
			return fmt.Errorf("/readyz: %d %s %v", status, body, err)
		}
		return nil
	})
	t.Logf("/readyz not ready %s after the second kill", d.Round(time.Millisecond))
	d = waitFor(t, 60*time.Second, "the coordinator to see the nodes down", func() error {
		status, body, err := call(gw, "GET", "/readyz", nil)
		if err != nil || status != 503 || !strings.Contains(string(body), "Cannot achieve consistency level") {
			return fmt.Errorf("/readyz: %d %s %v", status, body, err)
		}
		return nil
	})
	t.Logf("coordinator answers Unavailable %s later", d.Round(time.Millisecond))
	status, body, err := call(gw, "GET", "/readyz", nil)
	expectProblem(t, "/readyz", status, body, err, 503, "store-unavailable", "not ready: cassandra: read at LOCAL_QUORUM")
	t.Logf("/readyz: %s", body)

	// Prompt answers: well within the default budget of 10 s.
	const prompt = 3 * time.Second
	begin := time.Now()
	status, p, body, err := read(gw, s, q)
	if took := time.Since(begin); err != nil || status != 200 || !p.Partial || p.PartialReason != "unavailable" || took > prompt {
		t.Fatalf("partial=allow read: %d in %s, partial=%v reason=%q: %.300s %v", status, took, p.Partial, p.PartialReason, body, err)
	}
	// What it delivers is exact: the points of the cached, final hours.
	want := rawRows(pts)
	if len(p.Points) == 0 || len(p.Points) >= len(want) || p.NextCursor == "" {
		t.Fatalf("partial answer: %d of %d points, cursor %q", len(p.Points), len(want), p.NextCursor)
	}
	sameRows(t, "partial answer", p.Points, want[:len(p.Points)])
	t.Logf("partial answer: %d of %d points", len(p.Points), len(want))
	q.Set("partial", "deny")
	begin = time.Now()
	status, _, body, err = read(gw, s, q)
	if took := time.Since(begin); took > prompt {
		t.Fatalf("partial=deny read took %s", took)
	}
	expectProblem(t, "partial=deny read", status, body, err, 503, "store-unavailable")
	begin = time.Now()
	status, body, err = call(gw, "POST", "/v1/points", writeBody(s, []point{{now.UnixMilli() - 1000, 1}}))
	if took := time.Since(begin); took > prompt {
		t.Fatalf("write took %s", took)
	}
	expectProblem(t, "write", status, body, err, 503, "store-unavailable")

	restart(t, 2, 3)
	// Bounded generously: on a loaded machine the coordinator's gossip
	// takes a while to mark the nodes up again.
	d = waitFor(t, 2*time.Minute, "complete answers", func() error {
		status, p, body, err := read(gw, s, q)
		if err != nil || status != 200 || p.Partial || len(p.Points) != len(pts) {
			return fmt.Errorf("%d %.200s %v", status, body, err)
		}
		return nil
	})
	t.Logf("complete answers %s after the nodes were back", d.Round(time.Millisecond))
	sameRows(t, "after", readAll(t, gwList(gw), s, q), rawRows(pts))
	status, body, err = call(gw, "GET", "/readyz", nil)
	if err != nil || status != 200 {
		t.Fatalf("/readyz after the nodes were back: %d %s %v", status, body, err)
	}
}
