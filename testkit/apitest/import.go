package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

type importAnswer struct {
	Points     int              `json:"points"`
	Raw        int              `json:"raw"`
	Aggregated map[string]int   `json:"aggregated"`
	Windows    map[string]int64 `json:"windows"`
	Dropped    int              `json:"dropped"`
}

// A user imports history as NDJSON and CSV: what the raw tier keeps lands
// in raw partitions (not the late table), older points in the hour and day
// tiers, and reads answer the brute-force aggregates; bad input is a 400
// naming the point, another media type a 415.
func importHistory(t *testing.T, s *Server) {
	now := s.Now()
	type pt struct {
		t int64
		v int
	}
	var recent, old, ancient []pt
	recentFrom := tiers.AlignDown(now-2*tiers.Day, tiers.Hour)
	for i := range 120 { // two hours of 1-minute points, two days ago
		recent = append(recent, pt{recentFrom + int64(i)*tiers.Minute, i % 17})
	}
	oldFrom := tiers.AlignDown(now-100*tiers.Day, tiers.Day)
	for i := range 2 * 144 { // two days of 10-minute points, 100 days ago
		old = append(old, pt{oldFrom + int64(i)*10*tiers.Minute, i%23 - 5})
	}
	ancientFrom := tiers.AlignDown(now-400*tiers.Day, tiers.Day)
	for i := range 3 * 24 { // three days of hourly points, 400 days ago
		ancient = append(ancient, pt{ancientFrom + int64(i)*tiers.Hour, i % 7})
	}

	var nd strings.Builder
	for _, p := range append(recent, old...) {
		fmt.Fprintf(&nd, `{"series":"hist","t":%d,"v":%d}`+"\n", p.t, p.v)
	}
	var a importAnswer
	importBody(t, s, "application/x-ndjson", nd.String(), &a)
	if a.Points != 408 || a.Raw != 120 || a.Aggregated["hour"] != 288 || len(a.Aggregated) != 1 || a.Dropped != 0 ||
		a.Windows["hour"] != 48 || a.Windows["day"] != 2 {
		t.Fatalf("NDJSON import answered %+v", a)
	}
	var csv strings.Builder
	csv.WriteString("series,t,v\n")
	for i, p := range ancient {
		if i%2 == 0 {
			fmt.Fprintf(&csv, "hist,%d,%d\n", p.t, p.v)
		} else {
			fmt.Fprintf(&csv, "\"hist\", %s ,%d\n", time.UnixMilli(p.t).UTC().Format(time.RFC3339Nano), p.v)
		}
	}
	importBody(t, s, "text/csv", csv.String(), &a)
	if a.Points != 72 || a.Raw != 0 || a.Aggregated["day"] != 72 || a.Windows["day"] != 3 || a.Dropped != 0 {
		t.Fatalf("CSV import answered %+v", a)
	}
	// Imported history never goes to the late table; the raw buckets it
	// wrote into (the two hours two days ago) carry rewrite marks, which
	// tell every gateway's cache that they changed.
	late, err := s.Env.Store.LateBuckets(context.Background(), "hist", tiers.Span{From: tiers.MinTime, To: tiers.MaxTime})
	if err != nil || len(late) != 2 || late[0].Bucket != recentFrom || late[1].Bucket != recentFrom+tiers.Hour {
		t.Fatalf("marks after an import: %v, %v; want rewrite marks of the buckets at %d and %d", late, err, recentFrom, recentFrom+tiers.Hour)
	}
	for _, b := range late {
		if b.Version != 0 || b.Rewritten == 0 {
			t.Fatalf("bucket %d after an import: late version %d, rewrite version %d; want no late partition and a rewrite mark", b.Bucket, b.Version, b.Rewritten)
		}
	}
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}

	// Raw points as written, and every tier's windows as brute force makes
	// them.
	var r Answer
	s.Get("/v1/series/hist/points?"+Query("from", fmt.Sprint(recentFrom), "to", fmt.Sprint(recentFrom+2*tiers.Hour), "resolution", "raw"), &r)
	if r.Tier != "raw" || len(r.Points) != len(recent) {
		t.Fatalf("raw read: tier %s, %d points", r.Tier, len(r.Points))
	}
	for i, p := range r.Points {
		if int64(p[0]) != recent[i].t || p[1] != float64(recent[i].v) {
			t.Fatalf("raw point %d = %v, want %v", i, p, recent[i])
		}
	}
	check := func(pts []pt, resolution string, step int64, tier string) {
		t.Helper()
		type agg struct{ min, max, sum, count float64 }
		want := map[int64]*agg{}
		var order []int64
		for _, p := range pts {
			w := tiers.AlignDown(p.t, step)
			a := want[w]
			if a == nil {
				a = &agg{min: float64(p.v), max: float64(p.v)}
				want[w] = a
				order = append(order, w)
			}
			a.min, a.max = min(a.min, float64(p.v)), max(a.max, float64(p.v))
			a.sum += float64(p.v)
			a.count++
		}
		var got Answer
		from, to := tiers.AlignDown(pts[0].t, step), tiers.AlignDown(pts[len(pts)-1].t, step)+step
		s.Get("/v1/series/hist/points?"+Query("from", fmt.Sprint(from), "to", fmt.Sprint(to), "resolution", resolution, "agg", "min,max,sum,count"), &got)
		if got.Tier != tier || len(got.Points) != len(order) {
			t.Fatalf("%s read: tier %s, %d windows, want %s and %d", resolution, got.Tier, len(got.Points), tier, len(order))
		}
		for i, p := range got.Points {
			w := want[order[i]]
			if int64(p[0]) != order[i] || p[1] != w.min || p[2] != w.max || p[3] != w.sum || p[4] != w.count {
				t.Fatalf("%s window %d = %v, want %d %+v", resolution, i, p, order[i], *w)
			}
		}
	}
	check(recent, "1m", tiers.Minute, "minute")
	check(recent, "1h", tiers.Hour, "hour")
	check(old, "1h", tiers.Hour, "hour")
	check(old, "1d", tiers.Day, "day")
	check(ancient, "1d", tiers.Day, "day")

	// Bad input names the point; nothing of the batch is written.
	var p Problem
	status, _, body := s.Do("POST", "/v1/import", "text/csv", fmt.Sprintf("bad,%d,1\nbad,%d,x\nbad,%d\nbad,%d,1\nbad,%d,2\n", now-tiers.Day, now-tiers.Day, now, now+tiers.Day, now-900*tiers.Day))
	if err := json.Unmarshal(body, &p); err != nil || status != 400 || len(p.Errors) != 3 ||
		p.Errors[0].Param != "points[1].v" || p.Errors[1].Param != "points[2]" || p.Errors[2].Param != "points[3].t" {
		t.Fatalf("bad CSV: %d %s", status, body)
	}
	status, _, body = s.Do("POST", "/v1/import", "application/x-ndjson", fmt.Sprintf(`{"series":"bad","t":%d,"v":1}`, now+tiers.Day))
	if err := json.Unmarshal(body, &p); err != nil || status != 400 || len(p.Errors) != 1 || p.Errors[0].Param != "points[0].t" {
		t.Fatalf("future point: %d %s", status, body)
	}
	if st := s.Get("/v1/series/bad", nil); st != 404 {
		t.Fatalf("a rejected import created its series (status %d)", st)
	}
	if status, _, body := s.Do("POST", "/v1/import", "application/json", `{"points":[]}`); status != 415 {
		t.Fatalf("JSON body: %d %s", status, body)
	}
}

func importBody(t *testing.T, s *Server, contentType, body string, into *importAnswer) {
	t.Helper()
	status, _, b := s.Do("POST", "/v1/import", contentType, body)
	if status != 200 {
		t.Fatalf("import: %d %s", status, b)
	}
	*into = importAnswer{}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}
