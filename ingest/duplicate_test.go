package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A member given twice in one point is refused, named by the point and the
// member (encoding/json would keep the last value silently), in JSON
// bodies and NDJSON lines alike; encoding/json matches member names
// without regard to case, so "v" and "V" are the same member.
func TestRepeatedMembersAreRefused(t *testing.T) {
	for _, c := range []struct{ point, param string }{
		{`{"series":"a","t":1,"v":1,"v":2}`, "v"},
		{`{"series":"a","t":1,"v":1,"v":1}`, "v"},
		{`{"series":"a","series":"b","t":1,"v":1}`, "series"},
		{`{"t":1,"series":"a","t":"now","v":1}`, "t"},
		{`{"series":"a","t":1,"v":1,"V":2}`, "v"},
		{`{"series":"a","SERIES":"a","t":1,"v":1}`, "series"},
		{`{"series":"a","t":1,"v":null,"v":2}`, "v"},
		{`{"series":"a","t":null,"t":1,"v":2}`, "t"},
		{`{"series":"a","t":1,"v":1,"\u0076":2}`, "v"},
	} {
		body := fmt.Sprintf(`{"points":[{"series":"ok","t":1,"v":1},{"series":"ok","t":2,"v":1},%s]}`, c.point)
		lines := fmt.Sprintf("{\"series\":\"ok\",\"t\":1,\"v\":1}\n{\"series\":\"ok\",\"t\":2,\"v\":1}\n%s\n", c.point)
		want := "points[2]." + c.param
		for name, decode := range map[string]func() ([]Point, error){
			"JSON":          func() ([]Point, error) { return pointsOf(DecodeJSON(strings.NewReader(body), testNow)) },
			"encoding/json": func() ([]Point, error) { return pointsOf(decodeJSONStream(strings.NewReader(body), testNow)) },
			"NDJSON":        func() ([]Point, error) { return pointsOf(DecodeNDJSON(strings.NewReader(lines), testNow)) },
		} {
			pts, err := decode()
			var ve *ValidationError
			if !errors.As(err, &ve) || pts != nil || len(ve.Errors) != 1 || ve.Errors[0].Param != want || ve.Invalid != 1 || ve.Total != 3 {
				t.Errorf("%s %s: %v %v, want one error naming %s", name, c.point, pts, err, want)
				continue
			}
			if !strings.Contains(ve.Errors[0].Message, "twice") {
				t.Errorf("%s %s: %q does not say the member is repeated", name, c.point, ve.Errors[0].Message)
			}
		}
	}
}

// Random plain bodies with one member repeated in one point, in any
// spelling encoding/json takes for it: the error names that point and
// member, and no other; without the repetition the body decodes.
func TestRepeatedMembersProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	spellings := map[string][]string{"series": {"series", "Series", "SERIES", "sEries"}, "t": {"t", "T"}, "v": {"v", "V"}}
	for range 2000 {
		n := 1 + r.IntN(20)
		body := plainBody(r, n)
		if _, err := pointsOf(DecodeJSON(bytes.NewReader(body), testNow)); err != nil {
			t.Fatalf("the plain body %q: %v", body, err)
		}
		points := splitPoints(t, body)
		i := r.IntN(n)
		member := []string{"series", "t", "v"}[r.IntN(3)]
		extra := map[string]string{"series": `"sensor.a"`, "t": "1", "v": "2"}[member]
		spelled := spellings[member][r.IntN(len(spellings[member]))]
		// Insert the repetition after the point's '{' or before its '}'.
		if r.IntN(2) == 0 {
			points[i] = `{"` + spelled + `":` + extra + "," + points[i][1:]
		} else {
			points[i] = points[i][:len(points[i])-1] + `,"` + spelled + `":` + extra + "}"
		}
		want := fmt.Sprintf("points[%d].%s", i, member)
		jsonBody := `{"points":[` + strings.Join(points, ",") + `]}`
		var ndjson strings.Builder
		for _, p := range points {
			var line bytes.Buffer
			if err := json.Compact(&line, []byte(p)); err != nil { // one line; members kept as they are
				t.Fatal(err)
			}
			ndjson.WriteString(line.String() + "\n")
		}
		for name, decode := range map[string]func() ([]Point, error){
			"JSON":   func() ([]Point, error) { return pointsOf(DecodeJSON(strings.NewReader(jsonBody), testNow)) },
			"NDJSON": func() ([]Point, error) { return pointsOf(DecodeNDJSON(strings.NewReader(ndjson.String()), testNow)) },
		} {
			_, err := decode()
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Param != want || ve.Total != n {
				t.Fatalf("%s %q: %v, want one error naming %s of %d points", name, jsonBody, err, want, n)
			}
		}
	}
}

// splitPoints returns the point objects of a plain body, as written.
func splitPoints(t *testing.T, body []byte) []string {
	t.Helper()
	var doc struct{ Points []json.RawMessage }
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(doc.Points))
	for i, p := range doc.Points {
		out[i] = string(p)
	}
	return out
}

// repeatsAMember reports whether a point of body holds two members whose
// names encoding/json takes as the same: a brute-force reading, comparing
// every pair of names, for the fuzz targets. body is a JSON body, or one
// NDJSON line when line is true.
func repeatsAMember(body []byte, line bool) bool {
	var points []json.RawMessage
	if line {
		points = []json.RawMessage{body}
	} else {
		var doc struct {
			Points []json.RawMessage `json:"points"`
		}
		if json.Unmarshal(body, &doc) != nil {
			return false
		}
		points = doc.Points
	}
	for _, p := range points {
		dec := json.NewDecoder(bytes.NewReader(p))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			continue
		}
		var names []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			name, _ := tok.(string)
			if slices.ContainsFunc(names, func(k string) bool { return strings.EqualFold(k, name) }) {
				return true
			}
			names = append(names, name)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
	}
	return false
}
