//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/storetest"
)

// TestTwoGateways runs two gateways, each with its own store session, on
// one keyspace, as behind a load balancer: pages alternate between them
// and compose exactly, their series lists agree, and their rollup workers
// running at once write exactly the rows one worker writes.
func TestTwoGateways(t *testing.T) {
	now := storetest.Start().Truncate(time.Hour)
	a, b := gateway(t, baseConfig(keyspace), now), gateway(t, baseConfig(keyspace), now)
	// The reference: one gateway, one worker, on a keyspace of its own.
	single, err := createKeyspace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dropKeyspace(single); err != nil {
			t.Errorf("drop keyspace %s: %v", single, err)
		}
	})
	c := gateway(t, baseConfig(single), now)

	prefix := uniq("two")
	from := now.Add(-5 * time.Hour).UnixMilli()
	to := now.UnixMilli()
	var ids []string
	data := map[string][]point{}
	for i := range 3 {
		s := fmt.Sprintf("%s.s%d", prefix, i)
		ids = append(ids, s)
		data[s] = sawtooth(from+int64(i)*7000, 10_000+int64(i)*1000, 1400) // all before now
		mustWrite(t, []*apitest.Server{a, b}[i%2], s, data[s])
		mustWrite(t, c, s, data[s])
	}

	t.Run("cursors cross gateways", func(t *testing.T) {
		for _, s := range ids {
			whole := params("from", ms(from), "to", ms(to), "resolution", "raw", "limit", "100000")
			sameRows(t, s+" raw, one page", readAll(t, gwList(a), s, whole), rawRows(data[s]))
			raw := params("from", ms(from), "to", ms(to), "resolution", "raw", "limit", "113")
			sameRows(t, s+" raw, pages alternating", readAll(t, gwList(a, b), s, raw), rawRows(data[s]))
			agg := params("from", ms(from), "to", ms(to), "resolution", "1m", "agg", "min,max,sum,count", "limit", "17", "order", "asc")
			sameRows(t, s+" 1m windows, pages alternating", readAll(t, gwList(b, a), s, agg), windowRows(data[s], from, to, 60_000))
		}
	})

	t.Run("series lists agree", func(t *testing.T) {
		list := func(srv *apitest.Server, q url.Values) ([]byte, string) {
			t.Helper()
			status, body, err := call(srv, "GET", "/v1/series?"+q.Encode(), nil)
			if err != nil || status != 200 {
				t.Fatalf("list: %d %s %v", status, body, err)
			}
			var l struct {
				Series []struct {
					ID string `json:"id"`
				} `json:"series"`
				NextCursor string `json:"next_cursor"`
			}
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range l.Series {
				got = append(got, s.ID)
			}
			return []byte(strings.Join(got, ",")), l.NextCursor
		}
		la, _ := list(a, params("prefix", prefix))
		lb, _ := list(b, params("prefix", prefix))
		if !bytes.Equal(la, lb) || string(la) != strings.Join(ids, ",") {
			t.Fatalf("series lists differ: %s and %s, want %s", la, lb, strings.Join(ids, ","))
		}
		// And a listing paged across both.
		var paged []string
		q := params("prefix", prefix, "limit", "1")
		for i := 0; ; i++ {
			got, next := list([]*apitest.Server{a, b}[i%2], q)
			if len(got) > 0 {
				paged = append(paged, string(got))
			}
			if next == "" || i > 10 {
				break
			}
			q.Set("cursor", next)
		}
		if !slices.Equal(paged, ids) {
			t.Fatalf("paged across gateways: %v, want %v", paged, ids)
		}
	})

	t.Run("rollup workers converge", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := c.Env.Rollups.RunOnce(ctx, true); err != nil {
			t.Fatalf("the single worker: %v", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, g := range []*apitest.Server{a, b} {
			wg.Go(func() { _, errs[i] = g.Env.Rollups.RunOnce(ctx, true) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("worker %d of two: %v", i, err)
			}
		}
		s, err := session()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, table := range []string{"rollup_1m", "rollup_1h", "rollup_1d"} {
			rows := func(ks string) []string {
				iter := s.Query(fmt.Sprintf("SELECT series, bucket, t, min, max, sum, count FROM %s.%s", ks, table)).IterContext(ctx)
				var out []string
				var series string
				var bucket, tt time.Time
				var mn, mx, sum float64
				var count int64
				for iter.Scan(&series, &bucket, &tt, &mn, &mx, &sum, &count) {
					if strings.HasPrefix(series, prefix+".") {
						out = append(out, fmt.Sprintf("%s %d %d %v %v %v %d", series, bucket.UnixMilli(), tt.UnixMilli(), mn, mx, sum, count))
					}
				}
				if err := iter.Close(); err != nil {
					t.Fatalf("scan %s.%s: %v", ks, table, err)
				}
				slices.Sort(out)
				return out
			}
			one, two := rows(single), rows(keyspace)
			if len(one) == 0 {
				t.Fatalf("%s: the single worker wrote no rows", table)
			}
			if !slices.Equal(one, two) {
				t.Fatalf("%s: two workers wrote %d rows, one worker %d; first difference: %s", table, len(two), len(one), firstDiff(one, two))
			}
			t.Logf("%s: %d rows, identical", table, len(one))
		}
	})
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("row %d: %q vs %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d rows)", len(a), len(b))
}
