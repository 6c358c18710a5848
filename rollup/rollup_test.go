package rollup_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// The levels of the default pyramid.
const (
	levelMinute tiers.Level = iota + 1
	levelHour
	levelDay
)

func newEnv(t *testing.T) *querytest.Env {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return querytest.NewEnv(t, store, querytest.Options{})
}

// rows reads a whole rollup table's partition for the series.
func rows(t *testing.T, env *querytest.Env, level tiers.Level, series string, at int64) []tiers.Row {
	t.Helper()
	tier := env.Pyramid.Tier(level)
	b := tier.DefaultLayout().BucketOf(at)
	got, _, err := storetest.ReadAll(env.Store.Read(context.Background(), tiers.ReadRequest{
		Key: tiers.PartitionKey{Table: tier.Table, Series: series, Bucket: b.Start}, Span: b.Span(), PageSize: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func write(t *testing.T, env *querytest.Env, pts ...ingest.Point) {
	t.Helper()
	if _, err := env.Writer.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
}

// A point that arrives a day late corrects its minute, hour and day rows
// at the next run, giving the series a new generation (caches hold those
// rows as final), and a second run changes nothing.
func TestLatePointCorrectsEveryTier(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	minute := tiers.AlignDown(now-tiers.Day, tiers.Minute)
	// Every row written is told of (to the sealer, in a gateway).
	var mu sync.Mutex
	rewritten := map[tiers.Table][]int64{}
	env.Rollups.OnRewrite(func(series string, tier tiers.Tier, rows []tiers.Row) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			rewritten[tier.Table] = append(rewritten[tier.Table], r.T)
		}
	})
	write(t, env, ingest.Point{Series: "s", T: now - tiers.Minute, V: 1}) // something on time
	if _, err := env.Writer.Backfill(ctx, []ingest.Point{{Series: "s", T: minute + 10, V: 4}, {Series: "s", T: minute + 20, V: 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	check := func(wantMin, wantMax, wantSum float64, wantCount int64) {
		t.Helper()
		for _, l := range []tiers.Level{levelMinute, levelHour, levelDay} {
			w := tiers.AlignDown(minute, env.Pyramid.Tier(l).Step)
			var found *tiers.Row
			rs := rows(t, env, l, "s", w)
			for i := range rs {
				if rs[i].T == w {
					found = &rs[i]
				}
			}
			want := tiers.Row{T: w, Min: wantMin, Max: wantMax, Sum: wantSum, Count: wantCount}
			if l == levelDay && w <= now-tiers.Minute && now-tiers.Minute < w+tiers.Day {
				continue // the on-time point shares the day window
			}
			if found == nil || *found != want {
				t.Fatalf("%s row at %d = %+v, want %+v", env.Pyramid[l].Name, w, found, want)
			}
		}
	}
	check(4, 6, 10, 2)
	generation := func() int64 {
		t.Helper()
		info, err := env.Store.LookupSeries(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return info.Generation
	}
	// Points on time change windows no cache takes as final yet: the
	// series keeps its generation.
	gen := generation()
	env.Clock.Advance(time.Minute)
	write(t, env, ingest.Point{Series: "s", T: env.Clock.Now().UnixMilli() - tiers.Second, V: 1})
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	if g := generation(); g != gen {
		t.Fatalf("an on-time point changed the series' generation from %d to %d", gen, g)
	}
	// A day later (the clock moves), a late point for the same minute.
	env.Clock.Advance(time.Hour)
	res, err := env.Writer.Write(ctx, []ingest.Point{{Series: "s", T: minute + 30, V: -2}, {Series: "s", T: minute + 10, V: 5}})
	if err != nil || res.Late != 2 {
		t.Fatalf("late write: %+v %v", res, err)
	}
	clear(rewritten)
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	check(-2, 6, 9, 3)
	for _, l := range []tiers.Level{levelMinute, levelHour, levelDay} {
		tier := env.Pyramid.Tier(l)
		if !slices.Contains(rewritten[tier.Table], tiers.AlignDown(minute, tier.Step)) {
			t.Fatalf("the corrected %s row was not told of: %v", tier.Name, rewritten)
		}
	}
	// The corrected windows were complete, and cacheable: the series has
	// a new generation, which caches key on.
	if g := generation(); g == gen {
		t.Fatalf("the late correction left the series' generation at %d", g)
	}
	gen = generation()
	if _, err := env.Rollups.RunOnce(ctx, true); err != nil {
		t.Fatal(err)
	}
	check(-2, 6, 9, 3)
	if g := generation(); g != gen {
		t.Fatalf("a run with nothing to do changed the generation from %d to %d", gen, g)
	}
	// The same point again: its windows are recomputed, unchanged, and
	// nothing is written to the complete ones, nor told of.
	if _, err := env.Writer.Backfill(ctx, []ingest.Point{{Series: "s", T: minute + 10, V: 5}}); err != nil {
		t.Fatal(err)
	}
	clear(rewritten)
	rep, err := env.Rollups.RunOnce(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	check(-2, 6, 9, 3)
	if len(rewritten) != 0 || rep.Windows["minute"] != 0 {
		t.Fatalf("a recomputation that changed nothing wrote %v (%v windows)", rewritten, rep.Windows)
	}
	if g := generation(); g != gen {
		t.Fatalf("a recomputation that changed nothing changed the generation from %d to %d", gen, g)
	}
}

// A regular run leaves slots alone until no on-time point can still land in
// their windows; a forced run takes them at once.
func TestRegularRunWaitsForLateness(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	write(t, env, ingest.Point{Series: "s", T: now - tiers.Minute, V: 1})
	rep, err := env.Rollups.RunOnce(ctx, false)
	if err != nil || rep.Slots != 0 {
		t.Fatalf("a regular run took fresh slots: %+v %v", rep, err)
	}
	env.Clock.Advance(ingest.DefaultConfig().Lateness + 3*time.Minute)
	rep, err = env.Rollups.RunOnce(ctx, false)
	if err != nil || rep.Slots == 0 || rep.Windows["minute"] != 1 {
		t.Fatalf("the ripe slot was not taken: %+v %v", rep, err)
	}
	if cp, ok, _ := env.Store.Checkpoint(ctx, rollup.CheckpointName); !ok || cp != rep.Checkpoint {
		t.Fatalf("checkpoint %d %v, report %d", cp, ok, rep.Checkpoint)
	}
}

// Workers of several instances may run at once: the rows they write are the
// same, whoever wins.
func TestConcurrentWorkersAgree(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	now := env.Clock.Now().UnixMilli()
	var pts []ingest.Point
	for i := range 3000 {
		pts = append(pts, ingest.Point{Series: "c", T: now - 2*tiers.Day + int64(i)*57*tiers.Second, V: float64(i % 17)})
	}
	if _, err := env.Writer.Backfill(ctx, pts); err != nil {
		t.Fatal(err)
	}
	other := rollup.New(env.Store, env.Pyramid, env.Config.Scan, rollup.DefaultConfig(), env.Clock.Now, nil, nil)
	var wg sync.WaitGroup
	var errs [2]error
	wg.Go(func() { _, errs[0] = env.Rollups.RunOnce(ctx, true) })
	wg.Go(func() { _, errs[1] = other.RunOnce(ctx, true) })
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	truth := querytest.Truth{}
	for _, p := range pts {
		truth[p.T] = p.V
	}
	for _, l := range []tiers.Level{levelHour, levelDay} {
		step := env.Pyramid.Tier(l).Step
		var got []tiers.Row
		for b := tiers.AlignDown(now-2*tiers.Day, env.Pyramid.Tier(l).BucketWidth); b < now; b += env.Pyramid.Tier(l).BucketWidth {
			got = append(got, rows(t, env, l, "c", b)...)
		}
		want := truth.Windows(tiers.Span{From: tiers.AlignDown(now-2*tiers.Day, step), To: now}, step)
		var wantRows []tiers.Row
		for _, w := range want {
			r := w.Row
			r.T = w.T
			wantRows = append(wantRows, r)
		}
		if !slices.Equal(got, wantRows) {
			t.Fatalf("%s rows after concurrent runs differ from brute force: %d vs %d", env.Pyramid[l].Name, len(got), len(wantRows))
		}
	}
}

// A forced run over a backlog longer than MaxSlots takes all of it, a
// bounded number of slots at a time, before it says that every point is
// rolled up: the watermark it leaves must not cover windows it skipped.
func TestForcedRunTakesTheWholeBacklog(t *testing.T) {
	store, err := embedded.OpenInMemory(embedded.Options{Now: querytest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := querytest.NewEnv(t, store, querytest.Options{Configure: func(c *gateway.Config) { c.Rollup.MaxSlots = 3 }})
	ctx := context.Background()
	// Points written as they happen, one a minute for 40 minutes: each
	// lands in its own log slot.
	start := tiers.AlignDown(env.Clock.Now().UnixMilli(), tiers.Minute)
	const minutes = 40
	for i := range minutes {
		write(t, env, ingest.Point{Series: "s", T: start + int64(i)*tiers.Minute + 5, V: float64(i)})
		env.Clock.Advance(time.Minute)
	}
	rep, err := env.Rollups.RunOnce(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Windows["minute"] != minutes || rep.Slots < minutes {
		t.Fatalf("the forced run rolled up %v over %d slots, want %d minute windows", rep.Windows, rep.Slots, minutes)
	}
	got := map[int64]float64{}
	// Every bucket the 40 minutes touch: two when they cross midnight.
	width := env.Pyramid.Tier(levelMinute).BucketWidth
	for b := tiers.AlignDown(start, width); b < start+minutes*tiers.Minute; b += width {
		for _, r := range rows(t, env, levelMinute, "s", b) {
			got[r.T] = r.Sum
		}
	}
	for i := range minutes {
		if v, ok := got[start+int64(i)*tiers.Minute]; !ok || v != float64(i) {
			t.Fatalf("minute %d: row %v %v, want sum %d", i, v, ok, i)
		}
	}
	// Every window the watermark covers is rolled up.
	wm := env.Rollups.Watermarks(ctx)[levelMinute]
	if wm > start+minutes*tiers.Minute {
		t.Fatalf("minute watermark %d beyond the last window %d", wm, start+minutes*tiers.Minute)
	}
}
