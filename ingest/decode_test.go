package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

const testNow = 1768400000000

// sameDecoding checks that DecodeJSON and the encoding/json decoder agree
// on body: the same points, or the same error.
func sameDecoding(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := pointsOf(DecodeJSON(bytes.NewReader(body), testNow))
	want, wantErr := pointsOf(decodeJSONStream(bytes.NewReader(body), testNow))
	if !reflect.DeepEqual(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("body %q:\nDecodeJSON:     %v, %v\nencoding/json:  %v, %v", body, got, gotErr, want, wantErr)
	}
	if gotErr != nil && !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("body %q: error %#v, encoding/json's %#v", body, gotErr, wantErr)
	}
}

// plainBody is a batch as clients send it.
func plainBody(r *rand.Rand, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"points":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		series := []string{"sensor.a", "sensor.b", "x:y_z-1"}[r.IntN(3)]
		t := strconv.FormatInt(testNow-r.Int64N(1e9), 10)
		if r.IntN(10) == 0 {
			t = `"now-` + strconv.Itoa(1+r.IntN(59)) + `m"`
		} else if r.IntN(10) == 0 {
			t = `"2026-01-14T14:13:20.123Z"`
		}
		v := strconv.FormatFloat(float64(r.IntN(20001)-10000)/[]float64{1, 10, 100, 7}[r.IntN(4)], 'g', -1, 64)
		if r.IntN(10) == 0 {
			v = []string{"0", "-0", "1e3", "1E-3", "-12.5e+2", "0.000001", "123456789012345678901234567890"}[r.IntN(7)]
		}
		members := []string{`"series":"` + series + `"`, `"t":` + t, `"v":` + v}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		sp := []string{"", " ", "\n  ", "\t", "\r\n"}
		b.WriteString("{" + sp[r.IntN(len(sp))] + strings.Join(members, sp[r.IntN(len(sp))]+","+sp[r.IntN(len(sp))]) + sp[r.IntN(len(sp))] + "}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// The fast path decodes the plain form clients send, with any spacing,
// member order and number spelling.
func TestDecodeJSONFastPathTakesPlainBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		body := plainBody(r, 1+r.IntN(50))
		if _, ok := decodeJSONFast(body, testNow); !ok {
			t.Fatalf("fast path refused the plain body %q", body)
		}
		sameDecoding(t, body)
	}
}

// Bodies the fast path leaves to encoding/json, and bodies with errors,
// decode exactly as encoding/json decodes them.
func TestDecodeJSONEqualsEncodingJSON(t *testing.T) {
	bodies := []string{
		``, ` `, `{}`, `[]`, `null`, `{"points":[]}`, `{"points":null}`, `{"points":{}}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}]} `,
		`{"points":[{"series":"a","t":1768400000000,"v":1}]}x`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}]}{}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1},]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1,}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}],"points":[]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}],"other":1}`,
		`{"Points":[{"series":"a","t":1768400000000,"v":1}]}`,
		`{"\u0070oints":[{"series":"a","t":1768400000000,"v":1}]}`,
		`{"points":[{"Series":"a","T":1768400000000,"V":1}]}`,
		`{"points":[{"series":"a","series":"b","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"t":1768400000001,"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1,"v":2}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1,"extra":2}]}`,
		`{"points":[{"series":"a","t":1768400000000}]}`,
		`{"points":[{"t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","v":1}]}`,
		`{"points":[{"series":null,"t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","t":null,"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":null}]}`,
		`{"points":[{"series":"a\u002eb","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a\\b","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"ä","t":1768400000000,"v":1}]}`,
		"{\"points\":[{\"series\":\"a\xff\",\"t\":1768400000000,\"v\":1}]}",
		"{\"points\":[{\"series\":\"a\x7f\",\"t\":1768400000000,\"v\":1}]}",
		"{\"points\":[{\"series\":\"a\tb\",\"t\":1768400000000,\"v\":1}]}",
		`{"points":[{"series":"","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a b","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","t":1.5,"v":1}]}`,
		`{"points":[{"series":"a","t":1e3,"v":1}]}`,
		`{"points":[{"series":"a","t":-1,"v":1}]}`,
		`{"points":[{"series":"a","t":01,"v":1}]}`,
		`{"points":[{"series":"a","t":99999999999999999999,"v":1}]}`,
		`{"points":[{"series":"a","t":"now","v":1}]}`,
		`{"points":[{"series":"a","t":"now-1x","v":1}]}`,
		`{"points":[{"series":"a","t":"yesterday","v":1}]}`,
		`{"points":[{"series":"a","t":"2026-01-14T14:13:20Z","v":1}]}`,
		`{"points":[{"series":"a","t":true,"v":1}]}`,
		`{"points":[{"series":"a","t":[1],"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":"1"}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":true}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1e999}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":-1e999}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":.5}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":5.}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":+5}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":0x10}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1e}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":NaN}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":Infinity}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}]`,
		`{"points":[{"series":"a","t":1768400000000,"v":1}}`,
		`{"points":[1,2]}`, `{"points":["a"]}`, `{"points":[[]]}`,
		"\ufeff{\"points\":[{\"series\":\"a\",\"t\":1768400000000,\"v\":1}]}",
		`{"points":[{"series":"a","t":1768400000000,"v":1} {"series":"a","t":1768400000000,"v":1}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1},{"series":"a","t":1768400000000,"v":2}]}`,
		`{"points":[{"series":"a","t":1768400000000,"v":1},{"series":"b","t":1,"v":2}]}`,
	}
	for _, b := range bodies {
		sameDecoding(t, []byte(b))
	}
	// Mutations of plain bodies: inserted, deleted and replaced bytes.
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte(`{}[]:,"\ 0123456789.eE+-tvsx` + "\n\x00\xff")
	for range 20000 {
		body := plainBody(r, 1+r.IntN(4))
		for range 1 + r.IntN(3) {
			i := r.IntN(len(body) + 1)
			c := alphabet[r.IntN(len(alphabet))]
			switch r.IntN(3) {
			case 0:
				body = append(body[:i], append([]byte{c}, body[i:]...)...)
			case 1:
				if i < len(body) {
					body = append(body[:i], body[i+1:]...)
				}
			default:
				if i < len(body) {
					body[i] = c
				}
			}
		}
		sameDecoding(t, body)
	}
}

// A body over the size limit fails as it does when streamed: with the
// reader's error, unless the part read already has a syntax error.
func TestDecodeJSONReaderFailure(t *testing.T) {
	big := plainBody(rand.New(rand.NewPCG(5, 6)), 2000)
	for _, body := range [][]byte{big, append([]byte(`{"points":[}`), big...)} {
		read := func(decode func(io.Reader, int64) ([]Point, error)) error {
			rec := httptest.NewRecorder()
			_, err := decode(http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(body)), 1024), testNow)
			return err
		}
		got, want := read(decodeJSONPoints), read(decodeJSONStreamPoints)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("DecodeJSON: %v; encoding/json: %v", got, want)
		}
		var mbe *http.MaxBytesError
		if errors.As(want, &mbe) != errors.As(got, &mbe) {
			t.Fatalf("DecodeJSON: %#v; encoding/json: %#v", got, want)
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		f.Add(plainBody(r, 1+r.IntN(3)))
	}
	f.Add([]byte(`{"points":[{"series":"a","t":"now","v":-0.5e-3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) { sameDecoding(t, body) })
}

// BenchmarkDecodeJSON decodes a batch of 5,000 points with DecodeJSON and
// with encoding/json alone.
func BenchmarkDecodeJSON(b *testing.B) {
	body := plainBody(rand.New(rand.NewPCG(9, 10)), 5000)
	for _, c := range []struct {
		name   string
		decode func(io.Reader, int64) ([]Point, error)
	}{{"decoder=gateway", decodeJSONPoints}, {"decoder=encoding-json", decodeJSONStreamPoints}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := c.decode(bytes.NewReader(body), testNow); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(5000*float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// BenchmarkDecodeNDJSON decodes 200,000 NDJSON points of four series, as
// gateway import and POST /v1/import read them.
func BenchmarkDecodeNDJSON(b *testing.B) {
	var buf bytes.Buffer
	start := int64(testNow) - 5*tiers.Day
	for i := range 200000 {
		t := start + int64(i)*1000
		fmt.Fprintf(&buf, `{"series":"bench.import.s%d","t":%d,"v":%d}`+"\n", i/50000, t, (t/1000)%1000)
	}
	body := buf.Bytes()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pointsOf(DecodeNDJSON(bytes.NewReader(body), testNow)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(200000*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}
