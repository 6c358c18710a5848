package kafkaingest

import (
	"errors"
	"strconv"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tsgate/tsgate/ingest"
)

// The content-type header picks the decoder, parameters and the header's
// case aside; without one, an object starting with "points" is JSON and
// anything else NDJSON.
func TestDecodeRecordByContentType(t *testing.T) {
	now := t0
	for _, c := range []struct {
		name    string
		value   string
		headers []string
		points  int
		err     string // "", "invalid" or "media"
	}{
		{"json by header", `{"points":[{"series":"a","t":1,"v":1},{"series":"a","t":2,"v":2}]}`, []string{"content-type", "application/json"}, 2, ""},
		{"json with charset", `{"points":[{"series":"a","t":1,"v":1}]}`, []string{"Content-Type", "application/json; charset=utf-8"}, 1, ""},
		{"ndjson by header", "{\"series\":\"a\",\"t\":1,\"v\":1}\n\n{\"series\":\"b\",\"t\":\"now\",\"v\":2}\n", []string{"content-type", "application/x-ndjson"}, 2, ""},
		{"json sniffed", ` { "points" : [{"series":"a","t":1,"v":1}]}`, nil, 1, ""},
		{"ndjson sniffed", `{"series":"a","t":1,"v":1}`, nil, 1, ""},
		{"json by header, ndjson body", `{"series":"a","t":1,"v":1}`, []string{"content-type", "application/json"}, 0, "invalid"},
		{"empty", ``, nil, 0, "invalid"},
		{"remote write, not snappy", "\x0a\x00", []string{"content-type", "application/x-protobuf"}, 0, "invalid"},
		{"remote write", remoteWriteBody(2, 3), []string{"content-type", "application/x-protobuf"}, 6, ""},
		{"unknown", "a", []string{"content-type", "text/plain"}, 0, "media"},
		{"malformed header", "a", []string{"content-type", "application/json; ="}, 0, "media"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := decodeRecord(rec(0, c.value, c.headers...), now)
			pts := b.Points
			var ve *ingest.ValidationError
			var me *mediaError
			switch c.err {
			case "":
				if err != nil || len(pts) != c.points {
					t.Fatalf("%d points, %v; want %d", len(pts), err, c.points)
				}
			case "invalid":
				if !errors.As(err, &ve) {
					t.Fatalf("err = %v, want a validation error", err)
				}
			case "media":
				if !errors.As(err, &me) {
					t.Fatalf("err = %v, want a media error", err)
				}
			}
		})
	}
}

// Relative times resolve at the clock the consumer is given.
func TestDecodeRecordRelativeTimes(t *testing.T) {
	b, err := decodeRecord(rec(0, `{"series":"a","t":"now-1s","v":1}`), t0)
	pts := b.Points
	if err != nil || len(pts) != 1 || pts[0].T != t0-1000 {
		t.Fatalf("%+v, %v; want t=%d", pts, err, t0-1000)
	}
}

// remoteWriteBody is a snappy remote-write body of n series of k samples.
func remoteWriteBody(n, k int) string {
	var req prompb.WriteRequest
	for i := range n {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "instance", Value: strconv.Itoa(i)}}}
		for j := range k {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: int64(1768487842000 + j*1000), Value: float64(j)})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	b, _ := req.Marshal()
	return string(snappy.Encode(nil, b))
}
