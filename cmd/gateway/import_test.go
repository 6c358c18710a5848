package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// history is the input of the import tests: series whose points lie in
// the raw tier's retention, in the minute tier's only, the hour tier's
// only and the day tier's only, each grouped and in time order. Each
// series starts at noon, whatever the time of day of now: the importer
// writes a day's points once that day is complete, so a series that
// crosses midnight half way has a complete day in its first half, at
// every instant the tests run at.
type history struct {
	series []histSeries
}

type histSeries struct {
	id     string
	level  tiers.Level // the finest tier that holds it after the import
	points []ingest.Point
}

func newHistory(now int64) history {
	mk := func(id string, level tiers.Level, from, to, step int64) histSeries {
		s := histSeries{id: id, level: level}
		for i, t := 0, tiers.AlignDown(from, step); t < to; i, t = i+1, t+step {
			s.points = append(s.points, ingest.Point{Series: id, T: t, V: float64(i%37 - 11)})
		}
		return s
	}
	noon := tiers.AlignDown(now, tiers.Day) - 12*tiers.Hour
	return history{series: []histSeries{
		mk("imp.recent", tiers.LevelRaw, noon-3*tiers.Day, noon-2*tiers.Day, 30*tiers.Second),
		mk("imp.mid", tiers.Level(1), noon-20*tiers.Day, noon-19*tiers.Day, 2*tiers.Minute),
		mk("imp.old", tiers.Level(2), noon-60*tiers.Day, noon-55*tiers.Day, 5*tiers.Minute),
		mk("imp.ancient", tiers.Level(3), noon-500*tiers.Day, noon-490*tiers.Day, tiers.Hour),
	}}
}

func (h history) ndjson(series ...int) string {
	var b strings.Builder
	for _, i := range series {
		for j, p := range h.series[i].points {
			if j%10 == 3 {
				b.WriteString("\n") // blank lines are skipped
			}
			fmt.Fprintf(&b, `{"series":%q,"t":%d,"v":%g}`+"\n", p.Series, p.T, p.V)
		}
	}
	return b.String()
}

func (h history) csv(series ...int) string {
	var b strings.Builder
	b.WriteString("series,t,v\n")
	for _, i := range series {
		for j, p := range h.series[i].points {
			if j%2 == 0 {
				fmt.Fprintf(&b, "%s,%d,%g\n", p.Series, p.T, p.V)
			} else {
				fmt.Fprintf(&b, "%s,%s,%g\n", p.Series, time.UnixMilli(p.T).UTC().Format(time.RFC3339Nano), p.V)
			}
		}
	}
	return b.String()
}

// verify compares what the store in dir holds with brute force: raw
// points as written, and every tier from the series' finest on holding
// exactly the aggregates of its windows.
func (h history) verify(t *testing.T, store tiers.Store) {
	t.Helper()
	h.verifyIn(t, store, tiers.DefaultPyramid())
}

// verifyIn is verify for a store of pyramid p.
func (h history) verifyIn(t *testing.T, store tiers.Store, p tiers.Pyramid) {
	t.Helper()
	env := querytest.NewEnv(t, store, querytest.Options{Pyramid: p})
	ctx := context.Background()
	for _, s := range h.series {
		span := tiers.Span{From: s.points[0].T, To: s.points[len(s.points)-1].T + 1}
		if s.level == tiers.LevelRaw {
			req := env.Req(s.id, span, router.Resolution{Kind: router.RawPoints})
			got, _, err := env.ReadAll(ctx, req, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(s.points) {
				t.Fatalf("%s: %d raw points, want %d", s.id, len(got), len(s.points))
			}
			for i, p := range s.points {
				if got[i].T != p.T || got[i].Row.Value() != p.V {
					t.Fatalf("%s: raw point %d = %d %v, want %d %v", s.id, i, got[i].T, got[i].Row.Value(), p.T, p.V)
				}
			}
		}
		for _, l := range env.Pyramid.Levels()[1:] {
			tier := env.Pyramid.Tier(l)
			want := map[int64]tiers.Row{}
			for _, p := range s.points {
				w := tiers.AlignDown(p.T, tier.Step)
				r := want[w]
				r.Add(tiers.PointRow(w, p.V))
				r.T = w
				want[w] = r
			}
			got := map[int64]tiers.Row{}
			wspan := tiers.Span{From: tiers.AlignDown(span.From, tier.Step), To: tiers.AlignUp(span.To, tier.Step)}
			for b := range tier.DefaultLayout().Buckets(wspan, false) {
				rows, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{
					Key: tiers.PartitionKey{Table: tier.Table, Series: s.id, Bucket: b.Start}, Span: wspan, PageSize: 5000}))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					got[r.T] = r
				}
			}
			if l < s.level {
				if len(got) != 0 {
					t.Fatalf("%s: %d %s rows, want none (the tier does not keep them)", s.id, len(got), tier.Name)
				}
				continue
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d %s windows, want %d", s.id, len(got), tier.Name, len(want))
			}
			for w, r := range want {
				if got[w] != r {
					t.Fatalf("%s: %s window %d = %+v, want %+v", s.id, tier.Name, w, got[w], r)
				}
			}
		}
	}
}

func runMain(t *testing.T, stdin io.Reader, args ...string) (int, string) {
	t.Helper()
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, Stdin: stdin, LookupEnv: func(string) (string, bool) { return "", false }, Now: testClock}
	code := m.Run(context.Background(), args)
	return code, out.String()
}

func openEmbedded(t *testing.T, dir string) tiers.Store {
	t.Helper()
	store, err := embedded.Open(dir, embedded.Options{Now: testClock, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// gateway import reads NDJSON and CSV files and stdin into the store, and
// every tier holds what brute force says it should.
func TestImportFilesAndStdinIntoTheStore(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(testClock().UnixMilli())
	nd := filepath.Join(dir, "a.ndjson")
	csv := filepath.Join(dir, "b.csv")
	if err := os.WriteFile(nd, []byte(h.ndjson(0, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(csv, []byte(h.csv(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	profile := filepath.Join(dir, "import.pprof")
	code, out := runMain(t, nil, "import", "--data-dir", data, "--batch", "500", "--cpuprofile", profile, nd, csv)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// A CPU profile is gzip-compressed protobuf: its first two bytes are
	// gzip's.
	if b, err := os.ReadFile(profile); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes (%v), not a profile", len(b), err)
	}
	total := len(h.series[0].points) + len(h.series[1].points) + len(h.series[2].points)
	if !strings.Contains(out, fmt.Sprintf("import: %d points in", total)) || !strings.Contains(out, "points/s") || !strings.Contains(out, "100.0% of") {
		t.Fatalf("no progress and summary of %d points:\n%s", total, out)
	}
	if _, err := os.Stat(nd + ".import-checkpoint"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checkpoint of a finished import is still there: %v", err)
	}
	code, out = runMain(t, strings.NewReader(h.csv(3)), "import", "--data-dir", data, "--format", "csv")
	if code != 0 {
		t.Fatalf("stdin: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "aggregated into [day "+fmt.Sprint(len(h.series[3].points))+"]") {
		t.Fatalf("the summary does not say the points went to the day tier:\n%s", out)
	}
	h.verify(t, openEmbedded(t, data))

	// Invalid input names the line, and nothing of its batch is written.
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("series,t,v\nok,1700000000000,1\nok,1700000060000,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = runMain(t, nil, "import", "--data-dir", t.TempDir(), bad)
	if code == 0 || !strings.Contains(out, "line 3 v: must be a finite number") {
		t.Fatalf("bad input: exit %d:\n%s", code, out)
	}
}

// An import seals the final raw buckets it wrote into, those sealed before
// included: after a first import and a second one into the same buckets,
// every bucket holds chunks only (sealing it again finds no row) and reads
// back the union of both imports.
func TestImportSealsTheBucketsItWrote(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(testClock().UnixMilli())
	first := h.series[0] // raw: a day of 30 s points, 24 hourly buckets
	second := histSeries{id: first.id, level: first.level}
	for _, p := range first.points {
		second.points = append(second.points, ingest.Point{Series: p.Series, T: p.T + 15*tiers.Second, V: p.V + 0.5})
	}
	data := filepath.Join(dir, "data")
	for i, s := range []histSeries{first, second} {
		code, out := runMain(t, strings.NewReader(history{series: []histSeries{s}}.ndjson(0)), "import", "--data-dir", data, "--format", "ndjson", "--checkpoint", filepath.Join(dir, "cp"))
		if code != 0 {
			t.Fatalf("import %d: exit %d:\n%s", i+1, code, out)
		}
		// Each import folds its own 2,880 rows into the 24 buckets' chunks,
		// and the 1,440 minute rows it rolled up into the two days'
		// minute partitions (the hour and day tiers' are not complete).
		if want := fmt.Sprintf("import: sealed 24 raw buckets (%d points) and 2 rollup partitions (1440 rows) in 26 chunks", len(s.points)); !strings.Contains(out, want) {
			t.Fatalf("import %d does not say %q:\n%s", i+1, want, out)
		}
	}
	store, err := embedded.Open(data, embedded.Options{Now: testClock, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	raw := tiers.DefaultPyramid().Raw()
	span := tiers.Span{From: first.points[0].T, To: second.points[len(second.points)-1].T + 1}
	var got []tiers.Row
	for b := range raw.DefaultLayout().Buckets(span, false) {
		for eb := range b.EventBuckets {
			rows, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: first.id, Bucket: b.Start, EventBucket: eb}, Span: span, PageSize: 1000}))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
		}
		rep, err := store.SealBucket(ctx, first.id, b.Start, b.EventBuckets, raw.Retention)
		if err != nil || rep.Rows != 0 {
			t.Fatalf("bucket %d after the imports: %+v, %v; want no row left to seal", b.Start, rep, err)
		}
	}
	slices.SortFunc(got, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	if len(got) != len(first.points)+len(second.points) {
		t.Fatalf("%d points read back, %d imported", len(got), len(first.points)+len(second.points))
	}
	for i, p := range got {
		want := first.points[i/2]
		if i%2 == 1 {
			want = second.points[i/2]
		}
		if p.T != want.T || p.Value() != want.V {
			t.Fatalf("point %d: %d=%v, want %d=%v", i, p.T, p.Value(), want.T, want.V)
		}
	}
	// The minute partitions hold chunks only, and read back the windows of
	// both imports' points.
	minute := tiers.DefaultPyramid().Tier(1)
	var windows []tiers.Row
	for b := range minute.DefaultLayout().Buckets(span, false) {
		key := tiers.PartitionKey{Table: minute.Table, Series: first.id, Bucket: b.Start}
		rows, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: key, Span: span, PageSize: 1000}))
		if err != nil {
			t.Fatal(err)
		}
		windows = append(windows, rows...)
		rep, err := store.SealRollup(ctx, key, minute.Retention)
		if err != nil || rep.Rows != 0 || rep.Points != len(rows) {
			t.Fatalf("minute partition %d after the imports: %+v, %v; want %d rows sealed, none left to seal", b.Start, rep, err, len(rows))
		}
	}
	if len(windows) != 1440 {
		t.Fatalf("%d minute windows, want 1440", len(windows))
	}
	for _, w := range windows {
		var want tiers.Row
		for _, p := range got {
			if p.T >= w.T && p.T < w.T+tiers.Minute {
				want.Add(p)
			}
		}
		if w.Count != want.Count || w.Min != want.Min || w.Max != want.Max || w.Sum != want.Sum {
			t.Fatalf("minute window %d: %+v, want %+v", w.T, w, want)
		}
	}
	// Without --seal the buckets keep the rows an import writes.
	code, out := runMain(t, strings.NewReader(history{series: []histSeries{second}}.ndjson(0)), "import", "--data-dir", t.TempDir(), "--format", "ndjson", "--seal=false", "--checkpoint", filepath.Join(dir, "cp2"))
	if code != 0 || strings.Contains(out, "sealed") {
		t.Fatalf("--seal=false: exit %d:\n%s", code, out)
	}
}

// failingReader returns data, then fails as a dying disk or a killed pipe
// would.
type failingReader struct {
	r io.Reader
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errors.New("input lost")
	}
	return n, err
}

// An import interrupted part way, resumed with --resume, writes every
// point exactly once: the stored rows equal brute force, windows of
// aggregated history included (a window written twice from partial points
// would not), and the resumed run starts at the checkpoint rather than at
// the start.
func TestImportResumesAfterAnInterruption(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(testClock().UnixMilli())
	input := []byte(h.ndjson(0, 1, 2, 3))
	store := openEmbedded(t, filepath.Join(dir, "data"))
	checkpoint := filepath.Join(dir, "cp")
	total := 0
	for _, s := range h.series {
		total += len(s.points)
	}
	for _, cutAt := range []int{len(input) / 3, 2 * len(input) / 3} {
		t.Run(fmt.Sprint(cutAt), func(t *testing.T) {
			sink := &countingSink{next: storeSinkFor(t, store)}
			var errOut bytes.Buffer
			cfg := importConfig{batch: 400, parallel: 3, checkpoint: checkpoint, progress: time.Hour}
			first := &importRun{sink: sink, cfg: cfg, stderr: &errOut, now: testClock, window: tiers.Day,
				inputs: []importInput{{name: "-", format: "ndjson", size: int64(len(input)), open: func() (io.ReadCloser, error) {
					return io.NopCloser(&failingReader{bytes.NewReader(input[:cutAt])}), nil
				}}}}
			err := first.run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "input lost") || !strings.Contains(err.Error(), "--resume") {
				t.Fatalf("interrupted run: %v", err)
			}
			written := int(sink.points.Load())
			if written == 0 || written >= total {
				t.Fatalf("the interrupted run wrote %d of %d points; the test needs a part", written, total)
			}
			cfg.resume = true
			sink.points.Store(0)
			second := &importRun{sink: sink, cfg: cfg, stderr: &errOut, now: testClock, window: tiers.Day,
				inputs: []importInput{{name: "-", format: "ndjson", size: int64(len(input)), open: func() (io.ReadCloser, error) {
					return io.NopCloser(bytes.NewReader(input)), nil
				}}}}
			if err := second.run(context.Background()); err != nil {
				t.Fatalf("resumed run: %v\n%s", err, errOut.String())
			}
			if n := int(sink.points.Load()); n != total-written {
				t.Fatalf("the resumed run wrote %d points, want the %d after the checkpoint", n, total-written)
			}
			if _, err := os.Stat(checkpoint); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the checkpoint of a finished import is still there: %v", err)
			}
			if err := sink.next.(*storeSink).finish(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.verify(t, store)
		})
	}
}

type countingSink struct {
	next   importSink
	points atomic.Int64
}

func (c *countingSink) ImportBatch(ctx context.Context, b ingest.Batch) (ingest.ImportResult, error) {
	res, err := c.next.ImportBatch(ctx, b)
	if err == nil {
		c.points.Add(int64(len(b.Points)))
	}
	return res, err
}

// storeSinkFor imports into store as gateway import does.
func storeSinkFor(t *testing.T, store tiers.Store) importSink {
	t.Helper()
	env := querytest.NewEnv(t, store, querytest.Options{})
	return &storeSink{Importer: env.Gateway.Importer, worker: env.Rollups, rollups: true, stderr: io.Discard}
}

// gateway import --url sends batches to a running gateway's
// POST /v1/import.
func TestImportThroughAGateway(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	h := newHistory(testClock().UnixMilli())
	base, stop := serve(t, map[string]string{"GATEWAY_DATA_DIR": data, "GATEWAY_ROLLUP_INTERVAL": "0"})
	code, out := runMain(t, strings.NewReader(h.ndjson(0, 1, 2, 3)), "import", "--url", base, "--batch", "700", "--checkpoint", filepath.Join(dir, "cp"))
	if code != 0 {
		stop()
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if status, body := httpDo(t, "POST", base+"/v1/admin/rollups/run", ""); status != 200 {
		stop()
		t.Fatalf("rollups: %d %s", status, body)
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("serve exited with %d:\n%s", code, out)
	}
	h.verify(t, openEmbedded(t, data))
}

// Label lines give series their labels: one before each series' points,
// as an export writes them, and one after the last point. A series' points
// span many small batches written several at a time, in any order: each
// carries the labels, so whichever creates the series labels it. A bad
// label line is named by its line, and nothing of its batch is written.
func TestImportLabelLines(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(testClock().UnixMilli())
	want := map[string]tiers.Labels{}
	var in strings.Builder
	for i, s := range h.series[:2] {
		want[s.id] = tiers.Labels{"__name__": "imported", "n": fmt.Sprint(i)}
		fmt.Fprintf(&in, `{"series":%q,"labels":{"__name__":"imported","n":"%d"}}`+"\n", s.id, i)
		in.WriteString(h.ndjson(i))
	}
	want["imp.labels-only"] = tiers.Labels{"only": "labels"}
	in.WriteString(`{"series":"imp.labels-only","labels":{"only":"labels"}}` + "\n")
	nd := filepath.Join(dir, "labelled.ndjson")
	if err := os.WriteFile(nd, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if code, out := runMain(t, nil, "import", "--data-dir", data, "--batch", "100", "--parallel", "8", nd); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	store := openEmbedded(t, data)
	h2 := history{series: h.series[:2]}
	h2.verify(t, store)
	got, err := store.(tiers.LabelIndex).SeriesLabels(context.Background(), []string{"imp.recent", "imp.mid", "imp.labels-only"})
	if err != nil {
		t.Fatal(err)
	}
	for id, l := range want {
		if !got[id].Equal(l) {
			t.Errorf("labels of %s: %v, want %v", id, got[id], l)
		}
	}

	bad := filepath.Join(dir, "bad.ndjson")
	if err := os.WriteFile(bad, []byte(h.ndjson(0)+`{"series":"imp.recent","labels":{"a":"b"},"t":1,"v":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runMain(t, nil, "import", "--data-dir", t.TempDir(), bad)
	if line := fmt.Sprintf("line %d", strings.Count(h.ndjson(0), "\n")+1); code == 0 || !strings.Contains(out, line) {
		t.Fatalf("bad label line: exit %d, want an error naming %s:\n%s", code, line, out)
	}
}
