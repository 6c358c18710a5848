package ingest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// NDJSON lines of the plain form take a scanner; every body must decode
// exactly as encoding/json decodes the same points as a JSON body: the
// same points, or the same errors naming the same points.
func TestNDJSONDecodesLikeTheJSONBody(t *testing.T) {
	objects := []string{
		`{"series":"a.b","t":1700000000000,"v":1.5}`,
		`{"t":1700000000001,"v":-2,"series":"a.b"}`,
		`{ "series" : "c" , "t" : "2024-01-01T00:00:00Z" , "v" : 3e2 }`,
		`{"series":"c","t":"now-1h","v":0}`,
		`{"series":"bad id","t":1,"v":1}`,
		`{"series":"c","t":1,"v":"1"}`,
		`{"series":"c","t":1.5,"v":1}`,
		`{"series":"c","t":1,"v":1,"x":2}`,
		`{"series":"c","t":1}`,
		`{"series":"c","series":"d","t":1,"v":1}`,
		`{"series":"caf\u00e9","t":1,"v":1}`,
		`{"series":"c","t":1,"v":1e400}`,
		`{"series":"c","t":null,"v":1}`,
		`{"series":"c","t":"yesterday","v":1}`,
		`[1,2]`,
		`{"series":"c","t":99999999999999999999,"v":1}`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := 1 + r.IntN(6)
		var lines []string
		for range n {
			lines = append(lines, objects[r.IntN(len(objects))])
		}
		if round%3 == 0 { // mostly valid bodies too
			for i := range lines {
				lines[i] = objects[r.IntN(4)]
			}
		}
		now := int64(1700000000000)
		gotPts, gotErr := pointsOf(DecodeNDJSON(strings.NewReader(strings.Join(lines, "\n")+"\n"), now))
		wantPts, wantErr := pointsOf(DecodeJSON(strings.NewReader(`{"points":[`+strings.Join(lines, ",")+`]}`), now))
		if !reflect.DeepEqual(gotPts, wantPts) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("lines %q:\nNDJSON %v %v\nJSON   %v %v", lines, gotPts, gotErr, wantPts, wantErr)
		}
	}
}
