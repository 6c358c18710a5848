package seal

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// On a real store, a run changes no read: every raw partition reads the
// same points, stale markers bit for bit, before and after its bucket is
// sealed, and a point written into a sealed bucket afterwards (an import)
// is read over the sealed one.
func TestSealingChangesNoRead(t *testing.T) {
	raw := *tiers.DefaultPyramid().Raw()
	now := storetest.Start()
	store, err := embedded.OpenInMemory(embedded.Options{Now: func() time.Time { return now }, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	layout := raw.DefaultLayout()
	n := now.UnixMilli()
	first := n - 10*tiers.Hour
	var spans []tiers.SeriesInfo
	for _, id := range []string{"cpu", "mem", "disk"} {
		writes := map[tiers.PartitionKey][]tiers.Row{}
		for ts := first; ts <= n; ts += 10 * tiers.Second {
			v := math.Round(math.Sin(float64(ts)/1e6)*1e5) / 1e3
			if ts%(37*tiers.Minute) == 0 {
				v = math.Float64frombits(tiers.StaleNaN)
			}
			b, eb := layout.Locate(ts)
			k := tiers.PartitionKey{Table: tiers.TableRaw, Series: id, Bucket: b, EventBucket: eb}
			writes[k] = append(writes[k], tiers.PointRow(ts, v))
		}
		var ws []tiers.PartitionWrite
		for k, rows := range writes {
			ws = append(ws, tiers.PartitionWrite{Key: k, Retention: raw.Retention, Rows: rows})
		}
		if err := store.Write(ctx, ws); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, tiers.SeriesInfo{ID: id, First: first, Last: n})
	}
	if err := store.NoteSeries(ctx, spans); err != nil {
		t.Fatal(err)
	}
	readAll := func() map[tiers.PartitionKey][]tiers.Row {
		out := map[tiers.PartitionKey][]tiers.Row{}
		for _, s := range spans {
			for b := range layout.Buckets(s.Span(), false) {
				for eb := range b.EventBuckets {
					k := tiers.PartitionKey{Table: tiers.TableRaw, Series: s.ID, Bucket: b.Start, EventBucket: eb}
					rows, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: k, Span: b.Span(), PageSize: 50}))
					if err != nil {
						t.Fatal(err)
					}
					out[k] = rows
				}
			}
		}
		return out
	}
	before := readAll()
	w := New(store, raw, Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 2}, func() time.Time { return now }, nil, nil)
	rep, err := w.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Ten hours of hourly buckets, the last one or two not final yet.
	if rep.Buckets < 3*9 || rep.Buckets > 3*10 {
		t.Fatalf("%d buckets sealed", rep.Buckets)
	}
	after := readAll()
	for k, want := range before {
		got := after[k]
		if len(got) != len(want) {
			t.Fatalf("%+v: %d points after sealing, %d before", k, len(got), len(want))
		}
		for i := range want {
			if got[i].T != want[i].T || math.Float64bits(got[i].Sum) != math.Float64bits(want[i].Sum) {
				t.Fatalf("%+v point %d: %v after sealing, %v before", k, i, got[i], want[i])
			}
		}
	}
	// An import rewrites a sealed point.
	ts := first + 30*tiers.Second
	b, eb := layout.Locate(ts)
	k := tiers.PartitionKey{Table: tiers.TableRaw, Series: "cpu", Bucket: b, EventBucket: eb}
	if err := store.Write(ctx, []tiers.PartitionWrite{{Key: k, Retention: raw.Retention, Rows: []tiers.Row{tiers.PointRow(ts, 12345)}}}); err != nil {
		t.Fatal(err)
	}
	rows, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: k, Span: tiers.Span{From: ts, To: ts + 1}}))
	if err != nil || len(rows) != 1 || rows[0].Sum != 12345 {
		t.Fatalf("the imported point reads as %v (%v)", rows, err)
	}
	// A second run finds nothing new to seal.
	if rep, err := w.RunOnce(ctx); err != nil || rep.Buckets != 0 {
		t.Fatalf("second run: %+v, %v", rep, err)
	}
}
