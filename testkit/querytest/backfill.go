package querytest

import (
	"context"
	"testing"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/tiers"
)

// Backfill writes one point of series every step over span, valued v(t),
// through w's backfill path in batches of 50,000, and returns how many.
func Backfill(tb testing.TB, w *ingest.Writer, series string, span tiers.Span, step int64, v func(t int64) float64) int {
	tb.Helper()
	batch := make([]ingest.Point, 0, 50000)
	n := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := w.Backfill(context.Background(), batch); err != nil {
			tb.Fatalf("backfill %s: %v", series, err)
		}
		n += len(batch)
		batch = batch[:0]
	}
	for t := span.From; t < span.To; t += step {
		batch = append(batch, ingest.Point{Series: series, T: t, V: v(t)})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	return n
}
