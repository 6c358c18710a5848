package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const now = int64(1768487842123)

func TestDecodeJSON(t *testing.T) {
	pts, err := decodeJSONPoints(strings.NewReader(`{"points": [
		{"series": "sensor-1", "t": 1768487842123, "v": 21.5},
		{"series": "sensor-2", "t": "2026-01-15T14:37:22Z", "v": -3},
		{"series": "sensor-2", "t": "now-1m", "v": 0}]}`), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{{"sensor-1", 1768487842123, 21.5}, {"sensor-2", 1768487842000, -3}, {"sensor-2", now - 60000, 0}}
	if fmt.Sprint(pts) != fmt.Sprint(want) {
		t.Fatalf("got %v", pts)
	}
}

func TestDecodeReportsEveryBadPointUpTo100(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"points":[`)
	for i := range 250 {
		if i > 0 {
			b.WriteString(",")
		}
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"series":"ok","t":%d,"v":1}`, now)
		} else {
			fmt.Fprintf(&b, `{"series":"ok","t":%d,"v":"one"}`, now)
		}
	}
	b.WriteString(`]}`)
	_, err := pointsOf(DecodeJSON(strings.NewReader(b.String()), now))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	if len(ve.Errors) != MaxReportedErrors || ve.Invalid != 125 || ve.Total != 250 {
		t.Fatalf("%d errors reported, %d invalid of %d", len(ve.Errors), ve.Invalid, ve.Total)
	}
	if ve.Errors[0].Param != "points[1].v" || ve.Errors[99].Param != "points[199].v" {
		t.Fatalf("errors name %s ... %s", ve.Errors[0].Param, ve.Errors[99].Param)
	}
}

// checkDecoded asserts the invariants of any decode: either an error or
// valid points, never both, and every point's fields valid.
func checkDecoded(t *testing.T, pts []Point, err error) {
	t.Helper()
	if err != nil {
		if pts != nil {
			t.Fatalf("points returned with an error: %v", err)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("a decode error that is not a validation error: %T %v", err, err)
		}
		if len(ve.Errors) == 0 || len(ve.Errors) > MaxReportedErrors {
			t.Fatalf("%d errors", len(ve.Errors))
		}
		for _, e := range ve.Errors {
			if e.Param == "" || e.Message == "" {
				t.Fatalf("an error without param or message: %+v", e)
			}
		}
		return
	}
	if len(pts) == 0 {
		t.Fatal("no points and no error")
	}
	for _, p := range pts {
		if p.Series == "" || len(p.Series) > 200 {
			t.Fatalf("invalid series accepted: %q", p.Series)
		}
	}
}

func FuzzDecodeJSONInvariants(f *testing.F) {
	for _, s := range []string{
		`{"points":[{"series":"a","t":1768487842123,"v":1}]}`,
		`{"points":[{"series":"a","t":"now","v":1e300},{"series":"b","t":"2026-01-15T14:37:22Z","v":-0}]}`,
		`{"points":[]}`, `{}`, `[]`, `{"points":[{"series":"a","t":1.5,"v":1}]}`, `{"points":[{"series":"a","t":1,"v":1,"x":2}]}`,
		`{"points":[{"series":5}]}`, `{"points":`, `{"points":[{"series":"a","t":"now-1h","v":1}]} trailing`,
	} {
		f.Add(s)
	}
	f.Add(`{"points":[{"series":"a","t":1,"v":1,"v":2}]}`)
	f.Add(`{"points":[{"series":"a","Series":"b","t":1,"v":1}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		pts, err := pointsOf(DecodeJSON(strings.NewReader(body), now))
		checkDecoded(t, pts, err)
		if err == nil && repeatsAMember([]byte(body), false) {
			t.Fatalf("a point with a member given twice was accepted: %q", body)
		}
	})
}

func FuzzDecodeNDJSON(f *testing.F) {
	for _, s := range []string{
		"{\"series\":\"a\",\"t\":1768487842123,\"v\":1}\n{\"series\":\"b\",\"t\":\"now\",\"v\":2}\n",
		"\n\n", "not json\n", "{\"series\":\"a\",\"t\":1,\"v\":1} {\"x\":1}\n",
		"{\"series\":\"a\",\"t\":1,\"v\":1,\"V\":2}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		pts, err := pointsOf(DecodeNDJSON(strings.NewReader(body), now))
		checkDecoded(t, pts, err)
		if err != nil {
			return
		}
		for line := range strings.Lines(body) {
			if repeatsAMember([]byte(strings.TrimSpace(line)), true) {
				t.Fatalf("a line with a member given twice was accepted: %q", line)
			}
		}
		// The same points sent as one JSON body decode the same.
		var lines []string
		for line := range strings.Lines(body) {
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, line)
			}
		}
		asJSON := `{"points":[` + strings.Join(lines, ",") + `]}`
		want, err := pointsOf(DecodeJSON(strings.NewReader(asJSON), now))
		if err != nil || !reflect.DeepEqual(pts, want) {
			t.Fatalf("NDJSON %q gives %v; as JSON %q it gives %v, %v", body, pts, asJSON, want, err)
		}
	})
}

// A line holds one point object and nothing else, whatever follows it: a
// closing bracket used to pass, because the JSON decoder reports no more
// values before one.
func TestDecodeNDJSONRefusesTextAfterThePoint(t *testing.T) {
	for _, tail := range []string{"}", "}0", "]", "]]", "} {}", ` {"series":"a","t":1,"v":1}`, ",", "x"} {
		body := `{"series":"a","t":1768487842123,"v":1}` + "\n" + `{"series":"b","t":1768487842123,"v":2}` + tail + "\n"
		_, err := pointsOf(DecodeNDJSON(strings.NewReader(body), now))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Param != "points[1]" || ve.Invalid != 1 || ve.Total != 2 {
			t.Errorf("line with %q after the point: %v", tail, err)
		}
	}
}
