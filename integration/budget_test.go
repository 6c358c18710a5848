//go:build integration

package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// overrun bounds how far past its budget a read may answer: the budget is
// checked between rows and cancels reads in flight, so what remains is
// encoding the complete part and scheduling noise on a shared machine.
const overrun = time.Second

// TestBudgetOnCassandra reads two days of 1 Hz points (192 partitions) with
// a budget of a few milliseconds: every page comes back within the budget
// plus a small constant, pages are partial, and following their cursors
// yields exactly the unbudgeted answer.
func TestBudgetOnCassandra(t *testing.T) {
	store := openStore(t)
	env := querytest.NewEnv(t, store, querytest.Options{})
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	span := tiers.Span{From: now - 2*tiers.Day, To: now - tiers.Minute}
	querytest.Backfill(t, env.Writer, "budget", span, tiers.Second, func(ts int64) float64 { return float64(ts % 9973) })
	raw := router.Resolution{Kind: router.RawPoints}
	full, _, err := env.ReadAll(ctx, env.Req("budget", span, raw), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != int((span.To-span.From)/tiers.Second) {
		t.Fatalf("the full answer has %d points", len(full))
	}
	// A budget below a round trip can leave pages empty: the page then
	// resumes where it started. The bound on pages allows for that on a
	// loaded machine while still catching a cursor that does not advance.
	const maxPages = 50000
	for _, budget := range []time.Duration{10 * time.Millisecond, 40 * time.Millisecond} {
		req := env.Req("budget", span, raw)
		req.SLO = budget
		var got []query.Item
		pages, partials := 0, 0
		var worst time.Duration
		for {
			pages++
			if pages > maxPages {
				t.Fatalf("budget %s: no end after %d pages", budget, pages)
			}
			start := time.Now()
			p, err := env.Read(ctx, req)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, elapsed)
			if elapsed > budget+overrun {
				t.Fatalf("budget %s: a page took %s", budget, elapsed)
			}
			if p.Trailer.Partial {
				partials++
			}
			got = append(got, p.Items...)
			if p.Trailer.NextCursor == "" {
				break
			}
			req.Cursor = p.Trailer.NextCursor
		}
		if !slices.Equal(got, full) {
			t.Fatalf("budget %s: %d pages gave %d points, the full answer has %d", budget, pages, len(got), len(full))
		}
		if partials == 0 {
			t.Fatalf("budget %s: no page was cut short over %d partitions", budget, 192)
		}
		t.Logf("budget %s: %d pages (%d partial), slowest %s", budget, pages, partials, worst.Round(time.Millisecond))
	}

	// Budgets below one round trip: every page still makes progress, so
	// following cursors ends within the buckets of the range (48) and a
	// couple more pages, raw and aggregated, in both orders.
	for _, budget := range []time.Duration{time.Millisecond, 2 * time.Millisecond} {
		for _, res := range []router.Resolution{raw, {Kind: router.Window, Window: 5 * tiers.Minute}} {
			for _, desc := range []bool{false, true} {
				req := env.Req("budget", span, res)
				req.Desc = desc
				want, _, err := env.ReadAll(ctx, req, 100)
				if err != nil {
					t.Fatal(err)
				}
				req.SLO = budget
				got, pages, err := env.ReadAll(ctx, req, 48+2)
				if err != nil {
					t.Fatalf("budget %s resolution %+v desc %v: %v after %d pages", budget, res, desc, err, pages)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("budget %s resolution %+v desc %v: %d pages gave %d items, want %d", budget, res, desc, pages, len(got), len(want))
				}
				t.Logf("budget %s resolution %+v desc %v: %d pages", budget, res, desc, pages)
			}
		}
	}
}
