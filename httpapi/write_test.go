package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// A batch with points bad in form and points bad in time is refused with
// one error per bad point, in batch order, whatever kind of error each has
// — in JSON and in NDJSON.
func TestWriteReportsEveryBadPoint(t *testing.T) {
	s := newTestServer(t)
	now := s.Now()
	pts := []string{
		fmt.Sprintf(`{"series":"ok","t":%d,"v":1}`, now-tiers.Minute),
		fmt.Sprintf(`{"series":"ok","t":%d,"v":1}`, now-30*tiers.Day),     // older than the raw retention
		fmt.Sprintf(`{"series":"bad id","t":%d,"v":1}`, now-tiers.Minute), // bad form
		fmt.Sprintf(`{"series":"ok","t":%d,"v":1}`, now+tiers.Day),        // beyond the clock skew
		fmt.Sprintf(`{"series":"ok","t":%d}`, now-tiers.Minute),           // bad form
	}
	want := []string{"points[1].t", "points[2].series", "points[3].t", "points[4].v"}
	for _, c := range []struct{ ct, body string }{
		{"application/json", `{"points":[` + strings.Join(pts, ",") + `]}`},
		{"application/x-ndjson", strings.Join(pts, "\n")},
	} {
		status, _, body := s.Do("POST", "/v1/points", c.ct, c.body)
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); status != 400 || err != nil {
			t.Fatalf("%s: %d %s", c.ct, status, body)
		}
		var got []string
		for _, e := range p.Errors {
			got = append(got, e.Param)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") || !strings.Contains(p.Detail, "4 of 5 points are invalid") {
			t.Errorf("%s: errors %v, detail %q; want %v and 4 of 5", c.ct, got, p.Detail, want)
		}
	}
	if n := s.Get("/v1/series?prefix=ok", nil); n != 200 {
		t.Fatal(n)
	}
	var list struct{ Series []any }
	s.Get("/v1/series?prefix=ok", &list)
	if len(list.Series) != 0 {
		t.Fatalf("a refused batch wrote series %v", list.Series)
	}
}

// A point that gives a member twice is refused, naming the point and the
// member, in writes and imports alike; nothing of the batch is written.
func TestWriteRefusesARepeatedMember(t *testing.T) {
	s := newTestServer(t)
	at := s.Now() - tiers.Minute
	ok := fmt.Sprintf(`{"series":"kept","t":%d,"v":1}`, at)
	twice := fmt.Sprintf(`{"series":"kept","t":%d,"v":1,"v":2}`, at)
	for _, c := range []struct{ path, ct, body string }{
		{"/v1/points", "application/json", `{"points":[` + strings.Join([]string{ok, ok, ok, twice}, ",") + `]}`},
		{"/v1/points", "application/x-ndjson", strings.Join([]string{ok, ok, ok, twice}, "\n")},
		{"/v1/import", "application/x-ndjson", strings.Join([]string{ok, ok, ok, twice}, "\n")},
	} {
		status, _, body := s.Do("POST", c.path, c.ct, c.body)
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); status != 400 || err != nil || len(p.Errors) != 1 || p.Errors[0].Param != "points[3].v" {
			t.Errorf("%s %s: %d %s, want 400 naming points[3].v", c.path, c.ct, status, body)
		}
	}
	if status, _, body := s.Do("GET", "/v1/series/kept", "", ""); status != 404 {
		t.Errorf("a refused batch was written: %d %s", status, body)
	}
}
