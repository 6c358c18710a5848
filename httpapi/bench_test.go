package httpapi

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/tiers"
)

// benchPoints are sensor-like values at 1 Hz: two decimals when short,
// full float64 precision otherwise (as averages are).
func benchPoints(n int, short bool) []tiers.Row {
	rows := make([]tiers.Row, n)
	t := int64(1768400000000)
	for i := range rows {
		v := 20 + float64(i%977)/7
		if short {
			v = math.Round(v*100) / 100
		}
		rows[i] = tiers.PointRow(t+int64(i)*1000, v)
	}
	return rows
}

// BenchmarkEncodePoints compares the hand-written answer encoder with
// encoding/json on the same points, as the [t, v] arrays of an answer.
func BenchmarkEncodePoints(b *testing.B) {
	for _, short := range []bool{true, false} {
		name := "values=short"
		if !short {
			name = "values=full"
		}
		b.Run(name, func(b *testing.B) { benchEncode(b, benchPoints(100000, short)) })
	}
}

func benchEncode(b *testing.B, rows []tiers.Row) {
	res := &query.Head{}
	b.Run("encoder=gateway", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4<<20)
		for b.Loop() {
			buf = buf[:0]
			buf = append(buf, '[')
			for i, r := range rows {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = res.AppendItem(buf, query.Item{T: r.T, Row: r})
			}
			buf = append(buf, ']')
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
	b.Run("encoder=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		pts := make([][2]any, len(rows))
		for i, r := range rows {
			pts[i] = [2]any{r.T, r.Value()}
		}
		for b.Loop() {
			if _, err := json.Marshal(pts); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
}
