package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tsgate/tsgate/api"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// The ids . and .. are path segments that URLs drop ("/v1/series/../points"
// is "/v1/points" to most clients): a series of either id could be
// written but not read. Every place that takes an id refuses them, naming
// the parameter or the entry; a prefix of the listing may still be one.
func TestDotIDsAreRefused(t *testing.T) {
	s := newTestServer(t)
	at := s.Now() - tiers.Minute
	for _, id := range []string{".", ".."} {
		for _, c := range []struct {
			name, method, path, contentType, body, param string
		}{
			{"write", "POST", "/v1/points", "application/json",
				fmt.Sprintf(`{"points":[{"series":"ok","t":%d,"v":1},{"series":%q,"t":%d,"v":1}]}`, at, id, at), "points[1].series"},
			{"NDJSON write", "POST", "/v1/points", "application/x-ndjson",
				fmt.Sprintf("{\"series\":%q,\"t\":%d,\"v\":1}\n", id, at), "points[0].series"},
			{"import", "POST", "/v1/import", "application/x-ndjson",
				fmt.Sprintf("{\"series\":\"ok\",\"t\":%d,\"v\":1}\n{\"series\":%q,\"t\":%d,\"v\":1}\n", at, id, at), "points[1].series"},
			{"read", "GET", "/v1/series/" + id + "/points?from=now-1h", "", "", "id"},
			{"plan", "GET", "/v1/series/" + id + "/plan?from=now-1h", "", "", "id"},
			{"series", "GET", "/v1/series/" + id, "", "", "id"},
			{"layout", "GET", "/v1/series/" + id + "/layout", "", "", "id"},
			{"batch", "POST", "/v1/query", "application/json", fmt.Sprintf(`{"from":"now-1h","queries":[{"series":%q}]}`, id), "queries[0].series"},
			{"change layout", "PUT", "/v1/admin/series/" + id + "/layout", "application/json", `{"since":0,"bucket_ms":3600000,"event_buckets":4}`, "id"},
			{"block", "PUT", "/v1/admin/series/" + id + "/blocked", "application/json", `{"reason":"x"}`, "id"},
			{"unblock", "DELETE", "/v1/admin/series/" + id + "/blocked", "", "", "id"},
		} {
			status, _, body := s.Do(c.method, c.path, c.contentType, c.body)
			var p apitest.Problem
			_ = json.Unmarshal(body, &p)
			var params []string
			for _, e := range p.Errors {
				params = append(params, e.Param)
			}
			if status != 400 || !slices.Contains(params, c.param) {
				t.Errorf("%s of %q: %d %s, want 400 naming %s", c.name, id, status, body, c.param)
			}
		}
	}
	// Nothing of the refused batches was written.
	if status, _, body := s.Do("GET", "/v1/series/ok", "", ""); status != 404 {
		t.Errorf("a refused batch wrote its valid points: %d %s", status, body)
	}
	for _, prefix := range []string{".", ".."} {
		if status, _, body := s.Do("GET", "/v1/series?prefix="+prefix, "", ""); status != 200 {
			t.Errorf("listing with the prefix %q: %d %s", prefix, status, body)
		}
	}
	for _, id := range []string{"...", ".a", "a.", "a..b", "..a"} {
		s.WritePoints(fmt.Sprintf(`{"series":%q,"t":%d,"v":2}`, id, at))
		if status, _, body := s.Do("GET", "/v1/series/"+id+"/points?from=now-1h&resolution=raw", "", ""); status != 200 {
			t.Errorf("the id %q: %d %s", id, status, body)
		}
	}
}

// The contract's SeriesID schema and params.SeriesID agree on every
// string of up to five characters of an alphabet that holds each kind of
// character, and at the length bound.
func TestSeriesIDSchemaMatchesTheCheck(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec)
	if err != nil {
		t.Fatal(err)
	}
	schema := doc.Components.Schemas["SeriesID"].Value
	alphabet := []string{"a", "Z", "0", "_", ":", "-", ".", "/", " ", "é"}
	var all []string
	var grow func(s string, n int)
	grow = func(s string, n int) {
		all = append(all, s)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(s+c, n-1)
		}
	}
	grow("", 5)
	for _, n := range []int{199, 200, 201} {
		all = append(all, strings.Repeat("a", n), "."+strings.Repeat("a", n-1), ".."+strings.Repeat(".", n-2))
	}
	for _, s := range all {
		inContract := schema.VisitJSON(s) == nil
		if valid := params.SeriesID(s) == nil; inContract != valid {
			t.Fatalf("%q: the contract says valid=%v, params.SeriesID %v", s, inContract, valid)
		}
	}
	t.Logf("%d strings checked", len(all))
}
