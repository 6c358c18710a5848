package apitest

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/api/client"
	"github.com/tsgate/tsgate/tiers"
)

func ptr[T any](v T) *T { return &v }

// The client generated from the contract talks to the server: it writes
// points, lists the series, reads them back raw, aggregated (before and
// after a rollup run), paged and in a batch, and reads problems as
// problems.
func generatedClient(t *testing.T, s *Server) {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	now := s.Env.Clock.Now()
	// Two points in one hour window two hours back, and one 30s ago.
	hour := time.UnixMilli(tiers.AlignDown(now.UnixMilli()-2*tiers.Hour, tiers.Hour)).UTC()
	t1, t2 := hour.Add(10*time.Minute), hour.Add(20*time.Minute)
	t3 := now.Add(-30 * time.Second).UnixMilli()

	w, err := c.WritePointsWithResponse(ctx, client.WriteRequest{Points: []client.Point{
		{Series: "c-1", T: client.Time(t2), V: 1.5},
		{Series: "c-1", T: t1.Format(time.RFC3339), V: -2},
		{Series: "c-2", T: "now-30s", V: 7},
	}})
	if err != nil || w.JSON200 == nil || w.JSON200.Accepted != 3 {
		t.Fatalf("write: %v %d %s", err, w.StatusCode(), w.Body)
	}

	// The series, listed one page at a time.
	var listed []client.SeriesSummary
	lp := &client.ListSeriesParams{Prefix: ptr("c-"), Limit: ptr[int32](1)}
	for page := 0; ; page++ {
		list, err := c.ListSeriesWithResponse(ctx, lp)
		if err != nil || list.JSON200 == nil || page > 2 {
			t.Fatalf("list page %d: %v %s", page, err, list.Body)
		}
		listed = append(listed, list.JSON200.Series...)
		if list.JSON200.NextCursor == nil {
			break
		}
		lp.Cursor = list.JSON200.NextCursor
	}
	wantListed := []client.SeriesSummary{
		{ID: "c-1", First: t1.UnixMilli(), Last: t2.UnixMilli(), Labels: client.Labels{}},
		{ID: "c-2", First: t3, Last: t3, Labels: client.Labels{}},
	}
	if !reflect.DeepEqual(listed, wantListed) {
		t.Fatalf("listed %+v, want %+v", listed, wantListed)
	}
	list, err := c.ListSeriesWithResponse(ctx, &client.ListSeriesParams{Prefix: ptr("c-")})
	if err != nil || list.JSON200 == nil || len(list.JSON200.Series) != 2 || list.JSON200.Series[1].ID != "c-2" || list.JSON200.NextCursor != nil {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	one, err := c.GetSeriesWithResponse(ctx, "c-1")
	if err != nil || one.JSON200 == nil || one.JSON200.ID != "c-1" || one.JSON200.First != t1.UnixMilli() || one.JSON200.Last != t2.UnixMilli() {
		t.Fatalf("series: %v %d %s", err, one.StatusCode(), one.Body)
	}

	raw, err := c.ReadPointsWithResponse(ctx, "c-1", &client.ReadPointsParams{From: "now-3h", Resolution: ptr("raw")})
	if err != nil || raw.JSON200 == nil {
		t.Fatalf("read: %v %s", err, raw.Body)
	}
	want := client.Rows{{float64(t1.UnixMilli()), -2}, {float64(t2.UnixMilli()), 1.5}}
	if a := raw.JSON200; a.Tier != client.Tier("raw") || !slices.Equal(a.Columns, []client.Column{client.ColumnT, client.ColumnV}) ||
		len(a.Points) != 2 || !slices.Equal(a.Points[0], want[0]) || !slices.Equal(a.Points[1], want[1]) || a.NextCursor != nil {
		t.Fatalf("raw answer %s", raw.Body)
	}

	// The hour window holding both points, before and after the rollups
	// ran: the same sum, count and average whichever tier serves it.
	agg := client.QueryAgg{client.AggSum, client.AggCount, client.AggAvg, client.Percentile(99.9)}
	aggregated := func(when string) {
		t.Helper()
		win, err := c.ReadPointsWithResponse(ctx, "c-1", &client.ReadPointsParams{
			From: t1.Add(-time.Hour).Format(time.RFC3339), To: ptr(now.UTC().Format(time.RFC3339)),
			Resolution: ptr("1h"), Agg: &agg, Order: ptr(client.OrderDesc),
		})
		if err != nil || win.JSON200 == nil {
			t.Fatalf("aggregated read %s: %v %s", when, err, win.Body)
		}
		// p99.9 of -2 and 1.5 is the value at rank ⌊0.999·(2−1)⌋ = 0:
		// -2, within 1 %.
		if a := win.JSON200; a.ResolutionMs != time.Hour.Milliseconds() || len(a.Points) != 1 || len(a.Points[0]) != 5 ||
			!slices.Equal(a.Columns, []client.Column{client.ColumnT, client.ColumnSum, client.ColumnCount, client.ColumnAvg, "p99.9"}) ||
			!slices.Equal(a.Points[0][:4], []float64{float64(hour.UnixMilli()), -0.5, 2, -0.25}) || math.Abs(a.Points[0][4]+2) > 0.02 {
			t.Fatalf("aggregated answer %s: %s", when, win.Body)
		}
	}
	aggregated("before the rollups")
	run, err := c.RunRollupsWithResponse(ctx, nil)
	if err != nil || run.JSON200 == nil {
		t.Fatalf("rollups: %v %d %s", err, run.StatusCode(), run.Body)
	}
	aggregated("after the rollups")

	var paged client.Rows
	params := &client.ReadPointsParams{From: "now-3h", Resolution: ptr("raw"), Limit: ptr[int32](1)}
	for page := 0; ; page++ {
		r, err := c.ReadPointsWithResponse(ctx, "c-1", params)
		if err != nil || r.JSON200 == nil || page > 2 {
			t.Fatalf("page %d: %v %s", page, err, r.Body)
		}
		paged = append(paged, r.JSON200.Points...)
		if r.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = r.JSON200.NextCursor
	}
	if len(paged) != 2 || paged[0][0] != want[0][0] || paged[1][0] != want[1][0] {
		t.Fatalf("paged %v", paged)
	}

	batch, err := c.QueryBatchWithResponse(ctx, client.BatchRequest{
		From: ptr("now-3h"), Resolution: ptr("raw"),
		Queries: []client.BatchQuery{{Series: ptr("c-1")}, {Series: ptr("nope")}, {Series: ptr("c-2"), Resolution: ptr("1m"), Agg: &client.AggList{client.AggMax, client.AggMin}}},
	})
	if err != nil || batch.JSON200 == nil || len(batch.JSON200.Results) != 3 {
		t.Fatalf("batch: %v %s", err, batch.Body)
	}
	res := batch.JSON200.Results
	if res[0].Error != nil || len(res[0].Points) != 2 || res[1].Error == nil || res[1].Error.Type != client.ProblemTypeSeriesNotFound ||
		res[2].Error != nil || len(res[2].Points) != 1 || !slices.Equal(res[2].Points[0][1:], []float64{7, 7}) ||
		!slices.Equal(res[2].Columns, []client.Column{client.ColumnT, client.ColumnMax, client.ColumnMin}) {
		t.Fatalf("batch answer %s", batch.Body)
	}

	bad, err := c.ReadPointsWithResponse(ctx, "c-1", &client.ReadPointsParams{From: "now-1h", Limit: ptr[int32](0)})
	if err != nil || bad.ApplicationProblemJSON400 == nil {
		t.Fatalf("bad read: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
	if p := bad.ApplicationProblemJSON400; p.Type != client.ProblemTypeInvalidParameter || p.Errors == nil || (*p.Errors)[0].Param != "limit" {
		t.Fatalf("problem %s", bad.Body)
	}
	missing, err := c.GetSeriesWithResponse(ctx, "nope")
	if err != nil || missing.ApplicationProblemJSON404 == nil || missing.ApplicationProblemJSON404.Type != client.ProblemTypeSeriesNotFound {
		t.Fatalf("unknown series: %v %d %s", err, missing.StatusCode(), missing.Body)
	}
}
