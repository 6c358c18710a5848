package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenTime is the clock of the golden tests: answers hold no time
// relative to the real now.
var goldenTime = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// TestGoldenAnswers pins representative answers byte for byte (after
// normalizing what varies from run to run: elapsed_ms and cursors). Run
// with -update to rewrite them after a deliberate change, and review the
// diff: a changed golden file is a changed contract.
func TestGoldenAnswers(t *testing.T) {
	s := newTestServer(t)
	// Points are written 5 minutes before the answers are read and rolled
	// up 4 minutes later, once their log slot is closed: the minute tier
	// then holds what is older than the lateness delay, and raw points fill
	// in the rest.
	s.SetClock(goldenTime.Add(-5 * time.Minute))
	now := goldenTime.UnixMilli()
	var pts []string
	for i := range 230 { // every 30s from 10:00 to 11:54:30, values 0, 0.25, 0.5, ...
		pts = append(pts, fmt.Sprintf(`{"series":"golden-1","t":%d,"v":%g}`, now-2*tiers.Hour+int64(i)*30*tiers.Second, float64(i)/4))
	}
	for i := range 6 {
		pts = append(pts, fmt.Sprintf(`{"series":"golden-2","t":%d,"v":%d}`, now-tiers.Hour+int64(i)*tiers.Minute, 10*i))
	}
	s.WritePoints(pts...)
	s.SetClock(goldenTime.Add(-time.Minute))
	if status, _, body := s.Do("POST", "/v1/admin/rollups/run", "", ""); status != 200 {
		t.Fatalf("rollups: %d %s", status, body)
	}
	s.SetClock(goldenTime)
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"raw", "GET", "/v1/series/golden-1/points?" + q("from", "2026-01-15T11:00:00Z", "to", "2026-01-15T11:05:00Z", "resolution", "raw"), "", 200},
		{"raw-page", "GET", "/v1/series/golden-1/points?" + q("from", "2026-01-15T11:00:00Z", "to", "2026-01-15T11:05:00Z", "resolution", "raw", "order", "desc", "limit", "3"), "", 200},
		{"aggregated", "GET", "/v1/series/golden-1/points?" + q("from", "2026-01-15T10:00:00Z", "to", "2026-01-15T12:00:00Z", "resolution", "15m", "agg", "min,max,avg,count"), "", 200},
		{"plan", "GET", "/v1/series/golden-1/plan?" + q("from", "2026-01-08T12:00:00Z", "to", "2026-01-15T12:00:00Z"), "", 200},
		{"problem", "GET", "/v1/series/golden-1/points?" + q("from", "yesterday", "limit", "0", "order", "up"), "", 400},
		{"batch", "POST", "/v1/query", `{"from":"2026-01-15T11:00:00Z","to":"2026-01-15T11:03:00Z","resolution":"raw","queries":[{"series":"golden-1"},{"series":"nope"},{"series":"golden-2","from":"2026-01-15T11:00:00Z","to":"2026-01-15T12:00:00Z","resolution":"2m","agg":"sum,count"}]}`, 200},
		{"series", "GET", "/v1/series/golden-2", "", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := ""
			if c.body != "" {
				ct = "application/json"
			}
			status, _, body := s.Do(c.method, c.path, ct, c.body)
			if status != c.status {
				t.Fatalf("%s %s: %d %s", c.method, c.path, status, body)
			}
			got, err := normalizeAnswer(body)
			if err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			file := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGoldenAnswers -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %s differs from %s (run with -update if the change is meant):\n--- got\n%s\n--- want\n%s", c.method, c.path, file, got, want)
			}
		})
	}
}

var scalarArray = regexp.MustCompile(`\[\s*(?:-?[0-9][0-9.eE+-]*|null)(?:,\s*(?:-?[0-9][0-9.eE+-]*|null))*\s*\]`)

// normalizeAnswer replaces what varies between runs and indents the
// answer, keeping arrays of numbers (points) on one line.
func normalizeAnswer(body []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "elapsed_ms":
					x[k] = 0
				case "next_cursor":
					x[k] = "<cursor>"
				default:
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := scalarArray.ReplaceAllFunc(buf.Bytes(), func(m []byte) []byte {
		return []byte(strings.Join(strings.Fields(string(m)), " "))
	})
	return b, nil
}
