package grafana_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/tiers"
)

// grafanaPaths are the Grafana routes that read a body.
var grafanaPaths = []string{"/grafana/query", "/grafana/metrics", "/grafana/search", "/grafana/variable", "/grafana/metric-payload-options", "/grafana/annotations", "/grafana/tag-values", "/grafana/tag-keys"}

// FuzzGrafanaBody posts any body to each Grafana route that reads one.
// Besides the fuzz gateway's series, three labelled ones are there for
// selector targets to match.
func FuzzGrafanaBody(f *testing.F) {
	g := apitest.NewFuzzGateway(f)
	now := g.Env.Clock.Now().UnixMilli()
	batch := ingest.Batch{Labels: map[string]tiers.Labels{
		"cpu.a": {"__name__": "cpu", "dc": "eu", "host": "a"},
		"cpu.b": {"__name__": "cpu", "dc": "us", "host": "b"},
		"mem.a": {"__name__": "mem", "dc": "eu", "host": "a"},
	}}
	for id := range batch.Labels {
		for i := range 60 {
			batch.Points = append(batch.Points, ingest.Point{Series: id, T: now - tiers.Hour + int64(i)*tiers.Minute, V: float64(i)})
		}
	}
	if _, err := g.Env.Writer.WriteBatch(context.Background(), batch); err != nil {
		f.Fatal(err)
	}
	// The recorded envelopes, each to its route (named by the file's
	// first word).
	for i, path := range grafanaPaths {
		route := strings.TrimPrefix(path, "/grafana/")
		entries, err := filepathGlob("testdata/" + route + "*.json")
		if err != nil {
			f.Fatal(err)
		}
		for _, body := range entries {
			f.Add(uint8(i), body)
		}
	}
	for i := range grafanaPaths {
		f.Add(uint8(i), []byte(`{}`))
	}
	for _, b := range []string{
		`{"targets":[{"refId":"A","target":"(s-1|s-2)","payload":{"agg":"max","resolution":"1m"}}],"range":{"from":"now-1h","to":"now"}}`,
		`{"targets":[{"refId":"A","target":"room\\.(a|b)\\.temp","payload":"{\"resolution\":\"raw\"}"}],"maxDataPoints":3,"intervalMs":1e300}`,
		`{"targets":[{"target":"s-1","type":"table","hide":false}],"range":{"from":"2026-01-15T00:00:00Z","to":1}}`,
		`{"targets":[{"target":"s.*"}]}`, `null`, `[]`, `{"range":{"from":[]}}`,
		`{"targets":[{"refId":"A","target":"cpu{dc=~\"(eu|us)\"}","payload":{"agg":"max"}}],"range":{"from":"now-1h","to":"now"}}`,
		`{"targets":[{"refId":"A","target":"by dc","payload":{"match":["cpu{}","mem{}"],"group_by":"dc,__name__","resolution":"5m"}}],"filters":[{"key":"host","operator":"=|","value":"a","values":["a","b"]}]}`,
		`{"targets":[{"refId":"A","target":"all","payload":{"match":"{dc!=\"\"}","group_by":""}}],"adhocFilters":[{"key":"series","operator":"!~","value":"cpu\\..*"}]}`,
		`{"targets":[{"refId":"A","target":"cpu{}","type":"table","payload":{"group_by":["host"]}}],"filters":[{"key":"dc","operator":"<","value":"5"}]}`,
		`{"targets":[{"refId":"A","target":"cpu{host=}","payload":{"match":{"a":1},"group_by":7}}]}`,
	} {
		f.Add(uint8(0), []byte(b))
	}
	f.Add(uint8(1), []byte(`{"payload":{"prefix":["room\\."]}}`))
	f.Add(uint8(2), []byte(`{"target":"s*"}`))
	f.Add(uint8(3), []byte(`{"payload":"s\\.3"}`))
	f.Add(uint8(4), []byte(`{"name":"agg"}`))
	f.Add(uint8(6), []byte(`{"key":"dc","filters":[{"key":"host","operator":"=","value":"a"}]}`))
	f.Add(uint8(6), []byte(`{"key":"series"}`))
	f.Add(uint8(7), []byte(`{"filters":[],"timeRange":{"from":"now-6h","to":"now"}}`))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := grafanaPaths[int(route)%len(grafanaPaths)]
		apitest.CheckGrafanaAnswer(t, fmt.Sprintf("POST %s %q", path, body), g.Do(http.MethodPost, path, "application/json", body))
	})
}

// filepathGlob reads the files matching pattern.
func filepathGlob(pattern string) ([][]byte, error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
