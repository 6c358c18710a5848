package httpapi_test

// Fuzz targets of everything a request's bytes reach in the v1 API, sent
// through the gateway's handler: the batch body, the read and plan routes
// and the series listing. Whatever the input, the answer is never a 5xx,
// and every 4xx is a problem+json that names what it is about.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/testkit/apitest"
)

// FuzzBatchQuery posts any body under any Content-Type to /v1/query.
// Besides the answer's shape: only the media type application/json is
// ever answered.
func FuzzBatchQuery(f *testing.F) {
	g := apitest.NewFuzzGateway(f)
	for _, c := range []struct{ ct, body string }{
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"},{"series":"s-2","agg":"min,max","resolution":"5m"}]}`},
		{"application/json; charset=utf-8", `{"from":"now-2h","to":"now","order":"desc","limit":7,"queries":[{"series":"s.3","resolution":"raw"}]}`},
		{"application/json", `{"from":1,"max_points":"10","slo":"50ms","partial":"deny","queries":[{"series":"s-1","cursor":"AQ"}]}`},
		{"application/json", `{"queries":[]}`},
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"}]}]`},
		{"application/json", `{"from":"now-1h","queries":[{"series":"s-1"}]} {}`},
		{"application/json", `{"from":`},
		{"application/json", `{"queries":[{"series":"nope","from":"now-1h"}]}`},
		{"application/jsonxyz", `{"from":"now-1h","queries":[{"series":"s-1"}]}`},
		{"text/plain", `{}`},
		{"", ``},
	} {
		f.Add(c.ct, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		rec := g.Do(http.MethodPost, "/v1/query", ct, body)
		apitest.CheckV1Answer(t, fmt.Sprintf("POST /v1/query (%q) %q", ct, body), rec)
		mediaType, _, _ := strings.Cut(ct, ";")
		if rec.Code != http.StatusUnsupportedMediaType && !strings.EqualFold(strings.TrimSpace(mediaType), "application/json") {
			t.Fatalf("Content-Type %q answered %d, not 415", ct, rec.Code)
		}
		if rec.Code == http.StatusOK {
			if !json.Valid(body) {
				t.Fatalf("a body that is not one JSON value answered 200: %q", body)
			}
			var out struct {
				Results []json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) == 0 {
				t.Fatalf("a 200 without results: %s", rec.Body.Bytes())
			}
		}
	})
}

// FuzzReadPoints sends any series id and query string to the read and
// plan routes.
func FuzzReadPoints(f *testing.F) {
	g := apitest.NewFuzzGateway(f)
	for _, c := range []struct{ id, query string }{
		{"s-1", "from=now-1h"},
		{"s-1", "from=now-2h&to=now-1h&resolution=raw&order=desc&limit=5"},
		{"s.3", "from=2026-01-15T14:37:22Z&agg=min,max,avg&max_points=10"},
		{"s-2", "from=now-1h&resolution=5m&partial=deny&slo=100ms"},
		{"s-1", "from=now-1h&cursor=AQ&limit=1"},
		{"nope", "from=now-1h"},
		{"a b", "from=yesterday&agg=median&order=up"},
		{"s-1", "from=now-1h&from=now-2h&%zz"},
	} {
		f.Add(c.id, c.query)
	}
	f.Fuzz(func(t *testing.T, id, rawQuery string) {
		for _, route := range []string{"points", "plan"} {
			target := "/v1/series/" + url.PathEscape(id) + "/" + route + "?" + rawQuery
			apitest.CheckV1Answer(t, "GET "+target, g.Do(http.MethodGet, target, "", nil))
		}
	})
}

// FuzzListSeries sends any query string to the series listing. Besides
// the answer's shape: a page is only ever resumed from a cursor the
// listing issued, and the cursor it issues resumes it.
func FuzzListSeries(f *testing.F) {
	g := apitest.NewFuzzGateway(f)
	for _, q := range []string{
		"", "limit=2", "prefix=room.&limit=1", "cursor=" + cursor.EncodeList("s-1"),
		"cursor=garbage", "cursor=s-1", "limit=0", "prefix=a%20b", "cursor=" + cursor.EncodeList("a b"),
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		rec := g.Do(http.MethodGet, "/v1/series?"+rawQuery, "", nil)
		apitest.CheckV1Answer(t, "GET /v1/series?"+rawQuery, rec)
		if rec.Code != http.StatusOK {
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		if c := q.Get("cursor"); c != "" {
			id, err := cursor.DecodeList(c)
			if err != nil || params.SeriesID(id) != nil {
				t.Fatalf("cursor %q accepted: %q, %v", c, id, err)
			}
		}
		var page struct {
			Series []struct {
				ID string `json:"id"`
			} `json:"series"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if page.NextCursor != "" {
			last := page.Series[len(page.Series)-1].ID
			if id, err := cursor.DecodeList(page.NextCursor); err != nil || id != last {
				t.Fatalf("next_cursor %q decodes to %q, %v; the page ended at %q", page.NextCursor, id, err, last)
			}
		}
	})
}
