package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

type recordingStore struct {
	writes, notes int
}

func (s *recordingStore) Write(context.Context, []tiers.PartitionWrite) error { s.writes++; return nil }
func (s *recordingStore) NoteSeries(context.Context, []tiers.SeriesInfo) error {
	s.notes++
	return nil
}
func (s *recordingStore) MarkLate(context.Context, []tiers.LateMark) error { return nil }
func (s *recordingStore) MarkRewritten(context.Context, []string) error    { return nil }
func (s *recordingStore) SetLabels(context.Context, string, tiers.Labels) error {
	s.writes++
	return nil
}
func (s *recordingStore) LateBuckets(context.Context, string, tiers.Span) ([]tiers.LateBucket, error) {
	return nil, nil
}
func (s *recordingStore) MarkDirty(context.Context, int64, int64, []tiers.DirtyWindow) error {
	return nil
}

type noLayouts struct{}

func (noLayouts) Layout(context.Context, string) (tiers.Layout, error) { return nil, nil }

type blockedSet map[string]string

func (b blockedSet) IsBlocked(_ context.Context, id string) (tiers.BlockedSeries, bool, error) {
	r, ok := b[id]
	return tiers.BlockedSeries{Series: id, Reason: r}, ok, nil
}

// A batch holding points of a blocked series is refused whole: one entry
// per point of that series, in point order with the batch's other errors,
// each bad point counted once, and nothing written.
func TestBlockedSeriesRefuseTheBatch(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	p := tiers.DefaultPyramid()
	store := &recordingStore{}
	w := NewWriter(store, noLayouts{}, p, DefaultConfig(), func() time.Time { return now })
	w.RefuseBlocked(blockedSet{"bad": "stop"})
	n := now.UnixMilli()
	points := []Point{{"ok", n, 1}, {"bad", n, 1}, {"ok", n - 30*tiers.Day, 1}, {"bad", n - 30*tiers.Day, 1}}
	_, err := w.Write(context.Background(), points)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for _, e := range ve.Errors {
		got = append(got, e.Param)
	}
	if fmt.Sprint(got) != "[points[1].series points[2].t points[3].t points[3].series]" || ve.Invalid != 3 || ve.Total != 4 {
		t.Fatalf("errors %v, invalid %d of %d", got, ve.Invalid, ve.Total)
	}
	if ve.Errors[0].Message != "series bad is blocked: stop" {
		t.Fatalf("message %q", ve.Errors[0].Message)
	}
	if store.writes+store.notes != 0 {
		t.Fatalf("a refused batch reached the store: %d writes, %d notes", store.writes, store.notes)
	}
	if _, err := w.Write(context.Background(), points[:1]); err != nil || store.writes != 1 {
		t.Fatalf("a batch without blocked series: %v, %d writes", err, store.writes)
	}
}
