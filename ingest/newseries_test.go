package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// knownSeries is a registry that knows the series of its set.
type knownSeries map[string]bool

func (k knownSeries) LookupSeries(_ context.Context, id string) (tiers.SeriesInfo, error) {
	if k[id] {
		return tiers.SeriesInfo{ID: id}, nil
	}
	return tiers.SeriesInfo{}, tiers.ErrNotFound
}

// The per-batch bound refuses a batch for good; the per-minute bound
// refuses until the series created in the last 60 seconds leave room.
func TestNewSeriesLimit(t *testing.T) {
	ctx := context.Background()
	reg := knownSeries{"old": true}
	l := NewNewSeriesLimit(2, 3)
	at := time.Unix(1_768_487_842, 0)
	pts := func(ids ...string) []Point {
		var out []Point
		for _, id := range ids {
			out = append(out, Point{Series: id}, Point{Series: id, T: 1})
		}
		return out
	}
	var ns *NewSeriesError
	if err := l.Check(ctx, reg, pts("a", "b", "c", "old"), at); !errors.As(err, &ns) || ns.PerMinute || ns.New != 3 || ns.Limit != 2 {
		t.Fatalf("3 new series in one batch: %v", err)
	}
	if err := l.Check(ctx, reg, pts("a", "b", "old"), at); err != nil {
		t.Fatalf("2 new series: %v", err)
	}
	if err := l.Check(ctx, reg, pts("c", "d"), at.Add(30*time.Second)); !errors.As(err, &ns) || !ns.PerMinute || ns.Recent != 2 || ns.Limit != 3 {
		t.Fatalf("4 new series within a minute: %v", err)
	}
	if err := l.Check(ctx, reg, pts("c"), at.Add(59*time.Second)); err != nil {
		t.Fatalf("3 new series within a minute: %v", err)
	}
	if err := l.Check(ctx, reg, pts("d", "e"), at.Add(60*time.Second)); err != nil {
		t.Fatalf("the first two left the minute: %v", err)
	}
	if n, err := l.Count(ctx, reg, pts("old", "x", "x")); n != 1 || err != nil {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
	var off *NewSeriesLimit
	if err := off.Check(ctx, reg, pts("p", "q", "r", "s"), at); err != nil {
		t.Fatalf("no bound: %v", err)
	}
}
