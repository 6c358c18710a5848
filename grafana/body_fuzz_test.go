package grafana_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/apitest"
)

// grafanaPaths are the Grafana routes that read a body.
var grafanaPaths = []string{"/grafana/query", "/grafana/metrics", "/grafana/search", "/grafana/variable", "/grafana/metric-payload-options", "/grafana/annotations"}

// FuzzGrafanaBody posts any body to each Grafana route that reads one.
func FuzzGrafanaBody(f *testing.F) {
	g := apitest.NewFuzzGateway(f)
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
	} {
		f.Add(uint8(0), []byte(b))
	}
	f.Add(uint8(1), []byte(`{"payload":{"prefix":["room\\."]}}`))
	f.Add(uint8(2), []byte(`{"target":"s*"}`))
	f.Add(uint8(3), []byte(`{"payload":"s\\.3"}`))
	f.Add(uint8(4), []byte(`{"name":"agg"}`))
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
