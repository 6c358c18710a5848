package seal

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

type fakeStore struct {
	mu          sync.Mutex
	series      map[string]tiers.SeriesInfo
	checkpoints map[string]int64
	sealed      map[tiers.PartitionKey]int
}

// SealBucket records the bucket's partitions as sealed.
func (f *fakeStore) SealBucket(_ context.Context, series string, bucket int64, eventBuckets int, _ int64) (tiers.SealReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for eb := range eventBuckets {
		f.sealed[tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket, EventBucket: eb}]++
	}
	return tiers.SealReport{Points: 10, Rows: 10, Chunks: 1}, nil
}

// SealRollup records the rollup partition as sealed.
func (f *fakeStore) SealRollup(_ context.Context, key tiers.PartitionKey, _ int64) (tiers.SealReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sealed[key]++
	return tiers.SealReport{Points: 10, Rows: 10, Chunks: 1}, nil
}

func (f *fakeStore) ListSeries(_ context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	var ids []string
	for id := range f.series {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []tiers.SeriesInfo
	for _, id := range ids[:min(limit, len(ids))] {
		info := f.series[id]
		info.Layout = nil // only LookupSeries fills it
		out = append(out, info)
	}
	return out, nil
}

func (f *fakeStore) LookupSeries(_ context.Context, id string) (tiers.SeriesInfo, error) {
	info, ok := f.series[id]
	if !ok {
		return info, tiers.ErrNotFound
	}
	return info, nil
}

func (f *fakeStore) Checkpoint(_ context.Context, name string) (int64, bool, error) {
	v, ok := f.checkpoints[name]
	return v, ok, nil
}

func (f *fakeStore) AdvanceCheckpoint(_ context.Context, name string, to int64) error {
	f.checkpoints[name] = max(f.checkpoints[name], to)
	return nil
}

// finalPartitions lists brute force the raw partitions of a series whose
// bucket is final at cutoff and ends after from.
func finalPartitions(info tiers.SeriesInfo, layout tiers.Layout, from, cutoff int64) []tiers.PartitionKey {
	var out []tiers.PartitionKey
	for t := info.First; t <= info.Last; t += tiers.Second {
		b := layout.BucketOf(t)
		if b.End > cutoff || b.End <= from {
			continue
		}
		for eb := range b.EventBuckets {
			k := tiers.PartitionKey{Table: tiers.TableRaw, Series: info.ID, Bucket: b.Start, EventBucket: eb}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// The worker seals exactly the partitions of buckets that are final (ended
// more than lateness + grace ago), each once, from the raw retention on in
// its first run and from its checkpoint on after.
func TestSealsOnlyFinalBuckets(t *testing.T) {
	raw := *tiers.DefaultPyramid().Raw()
	start := time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)
	clock := start
	now := func() time.Time { return clock }
	n := start.UnixMilli()
	narrow := tiers.Layout{{Since: 0, Width: 10 * tiers.Minute, EventBuckets: 2}}
	f := &fakeStore{series: map[string]tiers.SeriesInfo{
		"a":       {ID: "a", First: n - 3*tiers.Hour - 5, Last: n},
		"narrow":  {ID: "narrow", First: n - 50*tiers.Minute, Last: n + 2*tiers.Hour, Layout: narrow},
		"expired": {ID: "expired", First: n - 9*tiers.Day, Last: n - 8*tiers.Day},
		"old":     {ID: "old", First: n - 6*tiers.Day, Last: n - 6*tiers.Day + tiers.Minute},
	}, checkpoints: map[string]int64{}, sealed: map[tiers.PartitionKey]int{}}
	cfg := Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 3}
	w := New(f, raw, cfg, now, nil, nil)

	from := n - raw.Retention
	for round := range 4 {
		cutoff := w.Cutoff(clock)
		rep, err := w.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var want []tiers.PartitionKey
		for _, info := range f.series {
			layout := info.Layout
			if layout == nil {
				layout = raw.DefaultLayout()
			}
			if info.Last < clock.UnixMilli()-raw.Retention {
				continue
			}
			want = append(want, finalPartitions(info, layout, from, cutoff)...)
		}
		type bucket struct {
			series string
			start  int64
		}
		distinct := map[bucket]bool{}
		for k := range f.sealed {
			distinct[bucket{k.Series, k.Bucket}] = true
		}
		if int(rep.Buckets) != len(distinct) {
			t.Errorf("round %d: %d buckets reported, %d sealed", round, rep.Buckets, len(distinct))
		}
		if len(f.sealed) != len(want) {
			t.Errorf("round %d: %d partitions sealed, want %d", round, len(f.sealed), len(want))
		}
		for _, k := range want {
			if f.sealed[k] != 1 {
				t.Errorf("round %d: %+v sealed %d times", round, k, f.sealed[k])
			}
		}
		for k := range f.sealed {
			if b := tiers.Layout(f.series[k.Series].Layout); b == nil {
				if k.Bucket+tiers.Hour > cutoff {
					t.Errorf("round %d: %+v sealed before it was final (cutoff %d)", round, k, cutoff-k.Bucket)
				}
			} else if k.Bucket+10*tiers.Minute > cutoff {
				t.Errorf("round %d: %+v sealed before it was final", round, k)
			}
			if k.Series == "expired" {
				t.Errorf("an expired series was sealed")
			}
		}
		if f.checkpoints[CheckpointName] != cutoff {
			t.Fatalf("round %d: checkpoint %d, want the cutoff %d", round, f.checkpoints[CheckpointName], cutoff)
		}
		clear(f.sealed)
		from = cutoff
		clock = clock.Add(37 * time.Minute)
	}
}

// With Revisit, a run seals again the buckets that ended up to Revisit
// before the checkpoint, so that a store deleting rows only some time
// after their chunks were written gets another call to do it.
func TestRevisitsRecentBuckets(t *testing.T) {
	raw := *tiers.DefaultPyramid().Raw()
	clock := time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)
	n := clock.UnixMilli()
	f := &fakeStore{series: map[string]tiers.SeriesInfo{"a": {ID: "a", First: n - 3*tiers.Hour, Last: n}},
		checkpoints: map[string]int64{}, sealed: map[tiers.PartitionKey]int{}}
	w := New(f, raw, Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 1, Revisit: 30 * time.Minute},
		func() time.Time { return clock }, nil, nil)
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 11:51 is final: the bucket [11:00, 12:00) is not yet.
	last := tiers.PartitionKey{Table: tiers.TableRaw, Series: "a", Bucket: tiers.AlignDown(n, tiers.Hour) - tiers.Hour}
	if f.sealed[last] != 0 {
		t.Fatalf("a bucket sealed before it was final")
	}
	clock = clock.Add(10 * time.Minute) // cutoff 12:01: [11:00, 12:00) is final
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(20 * time.Minute) // cutoff 12:21, checkpoint 12:01: still revisited
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(40 * time.Minute) // cutoff 13:01, checkpoint 12:21: 12:00 is less than 30m before it
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(40 * time.Minute) // checkpoint 13:01: 12:00 is more than 30m before it
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.sealed[last] != 3 {
		t.Fatalf("the bucket ending at 12:00 was sealed %d times, want 3", f.sealed[last])
	}
}

// With SealRollups, a run also seals the rollup partitions that end by
// their tier's watermark (and the raw cutoff), each once, and advances a
// checkpoint per tier; a tier with no watermark yet is left alone.
func TestSealsCompleteRollupPartitions(t *testing.T) {
	p := tiers.DefaultPyramid()
	clock := time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)
	n := clock.UnixMilli()
	f := &fakeStore{series: map[string]tiers.SeriesInfo{
		"a":   {ID: "a", First: n - 40*tiers.Day, Last: n},
		"old": {ID: "old", First: n - 20*tiers.Day, Last: n - 12*tiers.Day}, // its raw points expired
	}, checkpoints: map[string]int64{}, sealed: map[tiers.PartitionKey]int{}}
	wm := tiers.NoWatermarks(p)
	wm[1] = tiers.AlignDown(n, tiers.Day) + 3*tiers.Hour // today's minute partition is not complete
	w := New(f, *p.Raw(), Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 2},
		func() time.Time { return clock }, nil, nil).SealRollups(p, func(context.Context) tiers.Watermarks { return wm })
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	minute := *p.Tier(1)
	var want []tiers.PartitionKey
	for _, info := range f.series {
		for day := tiers.AlignDown(info.First, tiers.Day); day <= info.Last && day+tiers.Day <= wm[1]; day += tiers.Day {
			if day+tiers.Day > n-minute.Retention {
				want = append(want, tiers.PartitionKey{Table: minute.Table, Series: info.ID, Bucket: day})
			}
		}
	}
	got := 0
	for k, times := range f.sealed {
		if k.Table == tiers.TableRaw {
			continue
		}
		got++
		if k.Table != minute.Table || times != 1 || !slices.Contains(want, k) {
			t.Errorf("%+v sealed %d times", k, times)
		}
	}
	if got != len(want) {
		t.Errorf("%d rollup partitions sealed, want %d", got, len(want))
	}
	if cp := f.checkpoints[RollupCheckpointName(minute.Table)]; cp != wm[1] {
		t.Errorf("minute checkpoint %d, want the watermark %d", cp, wm[1])
	}
	if _, ok := f.checkpoints[RollupCheckpointName(p.Tier(2).Table)]; ok {
		t.Error("the hour tier, with no watermark, got a checkpoint")
	}
	// The next run, with the watermark a day on, seals today's partition
	// only.
	clear(f.sealed)
	clock = clock.Add(24 * time.Hour)
	wm[1] += tiers.Day
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	today := tiers.PartitionKey{Table: minute.Table, Series: "a", Bucket: tiers.AlignDown(n, tiers.Day)}
	for k := range f.sealed {
		if k.Table != tiers.TableRaw && k != today {
			t.Errorf("%+v sealed again", k)
		}
	}
	if f.sealed[today] != 1 {
		t.Errorf("today's minute partition sealed %d times", f.sealed[today])
	}
}

// deletingStore is a store that keeps sealed rows for a while and deletes
// them when asked (tiers.SealedRowsDeleter).
type deletingStore struct {
	*fakeStore
	calls int
	due   []int // what each call deletes
	err   error
}

func (d *deletingStore) DeleteSealedRows(context.Context) (int, error) {
	d.calls++
	if d.err != nil {
		return 0, d.err
	}
	n := 0
	if len(d.due) > 0 {
		n, d.due = d.due[0], d.due[1:]
	}
	return n, nil
}

// Every run asks a store that keeps sealed rows to delete those due, also
// a run with nothing left to seal (the rows of an import's seal, far
// behind the checkpoint, wait for no seal of theirs); a failure fails the
// run before it moves a checkpoint.
func TestRunsDeleteTheRowsSealsKept(t *testing.T) {
	raw := *tiers.DefaultPyramid().Raw()
	clock := time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)
	n := clock.UnixMilli()
	d := &deletingStore{fakeStore: &fakeStore{series: map[string]tiers.SeriesInfo{"a": {ID: "a", First: n - 3*tiers.Hour, Last: n}},
		checkpoints: map[string]int64{}, sealed: map[tiers.PartitionKey]int{}}, due: []int{0, 7}}
	w := New(d, raw, Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 1},
		func() time.Time { return clock }, nil, nil)
	rep, err := w.RunOnce(context.Background())
	if err != nil || rep.RowsDeleted != 0 || rep.Buckets == 0 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	// Nothing final since: the run seals nothing but still deletes.
	rep, err = w.RunOnce(context.Background())
	if err != nil || rep.RowsDeleted != 7 || rep.Buckets != 0 || d.calls != 2 {
		t.Fatalf("second run: %+v, %v, %d calls", rep, err, d.calls)
	}
	checkpoint := d.checkpoints[CheckpointName]
	d.err = context.DeadlineExceeded
	clock = clock.Add(2 * time.Hour)
	if _, err := w.RunOnce(context.Background()); err == nil {
		t.Fatal("a run whose deletes failed succeeded")
	}
	if d.checkpoints[CheckpointName] != checkpoint {
		t.Fatalf("a failed run moved the checkpoint from %d to %d", checkpoint, d.checkpoints[CheckpointName])
	}
}

// A run seals again the rollup partitions rows were written to since the
// last run (Rewritten) that its checkpoints have passed, once; those its
// checkpoints have not passed are left to the runs that get there.
func TestResealsRewrittenPartitions(t *testing.T) {
	p := tiers.DefaultPyramid()
	clock := time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)
	n := clock.UnixMilli()
	f := &fakeStore{series: map[string]tiers.SeriesInfo{"a": {ID: "a", First: n - 20*tiers.Day, Last: n}},
		checkpoints: map[string]int64{}, sealed: map[tiers.PartitionKey]int{}}
	wm := tiers.NoWatermarks(p)
	today := tiers.AlignDown(n, tiers.Day)
	wm[1] = today
	w := New(f, *p.Raw(), Config{Interval: time.Minute, Lateness: 15 * time.Minute, Grace: time.Minute, Parallelism: 1},
		func() time.Time { return clock }, nil, nil).SealRollups(p, func(context.Context) tiers.Watermarks { return wm })
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	minute, hour := *p.Tier(1), *p.Tier(2)
	clear(f.sealed)
	// Rows of three days ago (two partitions: the window spans midnight)
	// and of today, and hour rows, whose tier has no checkpoint yet.
	threeDays := today - 3*tiers.Day
	w.Rewritten("a", minute, []tiers.Row{{T: threeDays - tiers.Minute}, {T: threeDays}, {T: threeDays + tiers.Hour}, {T: today + tiers.Hour}})
	w.Rewritten("a", hour, []tiers.Row{{T: threeDays}})
	w.Rewritten("a", *p.Raw(), []tiers.Row{{T: threeDays}}) // not a rollup tier
	rep, err := w.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[tiers.PartitionKey]int{
		{Table: minute.Table, Series: "a", Bucket: threeDays - tiers.Day}: 1,
		{Table: minute.Table, Series: "a", Bucket: threeDays}:             1,
	}
	if !maps.Equal(f.sealed, want) || rep.Partitions != 2 {
		t.Fatalf("sealed %v (report %+v), want %v", f.sealed, rep, want)
	}
	clear(f.sealed)
	if _, err := w.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.sealed) != 0 {
		t.Fatalf("sealed again without a rewrite: %v", f.sealed)
	}
}
