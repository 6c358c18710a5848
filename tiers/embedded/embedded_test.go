package embedded

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

func TestConformanceInMemory(t *testing.T) {
	s, err := OpenInMemory(Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	storetest.Run(t, s, tiers.DefaultPyramid())
}

// A pyramid with a 10s tier under the minute tier keeps its rows in a
// table of its own, which the store keys by name.
func TestConformanceFiveTiers(t *testing.T) {
	s, err := OpenInMemory(Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	storetest.Run(t, s, storetest.FiveTiers())
}

func TestConformanceOnDisk(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	storetest.Run(t, s, tiers.DefaultPyramid())
}

func closeStore(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// clock is a settable clock for expiry tests.
type clock struct{ ms atomic.Int64 }

func newClock(ms int64) *clock {
	c := &clock{}
	c.ms.Store(ms)
	return c
}

func (c *clock) Now() time.Time  { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d int64) { c.ms.Add(d) }

func readAll(t *testing.T, s *Store, req tiers.ReadRequest) []tiers.Row {
	t.Helper()
	rows, _, err := storetest.ReadAll(s.Read(context.Background(), req))
	if err != nil {
		t.Fatalf("read %+v: %v", req, err)
	}
	return rows
}

// countKeys counts the stored records of one kind, expired or not.
func countKeys(t *testing.T, s *Store, kind byte) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	return n
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	raw := tiers.PartitionKey{Table: tiers.TableRaw, Series: "cpu.busy", Bucket: base, EventBucket: 2}
	roll := tiers.PartitionKey{Table: tiers.RollupTable(tiers.Hour), Series: "cpu.busy", Bucket: base}
	rawRows := []tiers.Row{tiers.PointRow(base+1, 1.5), tiers.PointRow(base+2, -2)}
	rollRows := []tiers.Row{{T: base, Min: 1, Max: 5, Sum: 9, Count: 3}}
	if err := s.Write(ctx, []tiers.PartitionWrite{
		{Key: raw, Retention: tiers.Week, Rows: rawRows},
		{Key: roll, Rows: rollRows},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteSeries(ctx, []tiers.SeriesInfo{{ID: "cpu.busy", First: base + 1, Last: base + 2}}); err != nil {
		t.Fatal(err)
	}
	entry := tiers.LayoutEntry{Since: base + tiers.Day, Width: 15 * tiers.Minute, EventBuckets: 8}
	if err := s.AppendLayout(ctx, "cpu.busy", entry); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLate(ctx, []tiers.LateMark{{Series: "cpu.busy", Bucket: base, Retention: tiers.Week}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDirty(ctx, base, tiers.Week, []tiers.DirtyWindow{{Series: "cpu.busy", Window: base}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceCheckpoint(ctx, "rollup", 42); err != nil {
		t.Fatal(err)
	}
	secret, err := s.Secret(ctx, "cursor", func() ([]byte, error) { return []byte("k1"), nil })
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}

	s, err = Open(dir, Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	all := tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}
	if got := readAll(t, s, tiers.ReadRequest{Key: raw, Span: all, PageSize: 10}); !slices.Equal(got, rawRows) {
		t.Errorf("raw rows after reopen: %v, want %v", got, rawRows)
	}
	if got := readAll(t, s, tiers.ReadRequest{Key: roll, Span: all, PageSize: 10}); !slices.Equal(got, rollRows) {
		t.Errorf("rollup rows after reopen: %v, want %v", got, rollRows)
	}
	info, err := s.LookupSeries(ctx, "cpu.busy")
	if err != nil {
		t.Fatal(err)
	}
	if info.First != base+1 || info.Last != base+2 || !slices.Equal(info.Layout, tiers.Layout{entry}) {
		t.Errorf("series after reopen: %+v", info)
	}
	if got, err := s.LateBuckets(ctx, "cpu.busy", all); err != nil || len(got) != 1 || got[0].Bucket != base || got[0].Version == 0 {
		t.Errorf("late buckets after reopen: %v, %v", got, err)
	}
	if got, err := s.DirtyWindows(ctx, base); err != nil || len(got) != 1 {
		t.Errorf("dirty windows after reopen: %v, %v", got, err)
	}
	if v, ok, err := s.OldestDirtySlot(ctx); err != nil || !ok || v != base {
		t.Errorf("oldest dirty slot after reopen: %d, %v, %v", v, ok, err)
	}
	if v, ok, err := s.Checkpoint(ctx, "rollup"); err != nil || !ok || v != 42 {
		t.Errorf("checkpoint after reopen: %d, %v, %v", v, ok, err)
	}
	again, err := s.Secret(ctx, "cursor", func() ([]byte, error) { return []byte("k2"), nil })
	if err != nil || !bytes.Equal(again, secret) {
		t.Errorf("secret after reopen: %q, %v; want %q", again, err, secret)
	}
}

func TestCloseReleasesOpenReads(t *testing.T) {
	ctx := context.Background()
	s, err := OpenInMemory(Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "r", Bucket: base}
	var rows []tiers.Row
	for i := range int64(10) {
		rows = append(rows, tiers.PointRow(base+i, 1))
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Day, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	pages := s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 3})
	if page, err := pages.Next(); err != nil || len(page) != 3 {
		t.Fatalf("first page: %d rows, %v", len(page), err)
	}
	unstarted := s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 3})
	closeStore(t, s)
	if _, err := pages.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after the store closed: %v, want ErrClosed", err)
	}
	if _, err := unstarted.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next of an unstarted read after the store closed: %v, want ErrClosed", err)
	}
	if err := pages.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Rows: rows}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

func TestReadStoppedEarly(t *testing.T) {
	ctx := context.Background()
	s, err := OpenInMemory(Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "r", Bucket: base}
	var rows []tiers.Row
	for i := range int64(10) {
		rows = append(rows, tiers.PointRow(base+i, 1))
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Day, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	pages := s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, Desc: true, PageSize: 4})
	page, err := pages.Next()
	if err != nil || len(page) != 4 || page[0].T != base+9 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	for range 2 {
		if err := pages.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pages.Next(); err == nil {
		t.Fatal("Next after Close returned no error")
	}
	if n := len(s.reads); n != 0 {
		t.Fatalf("%d reads still registered after Close", n)
	}
	// The last page ends the read without waiting for Close.
	pages = s.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 100})
	if page, err := pages.Next(); err != nil || len(page) != 10 {
		t.Fatalf("whole partition: %d rows, %v", len(page), err)
	}
	if n := len(s.reads); n != 0 {
		t.Fatalf("an exhausted read still holds its iterator")
	}
	if _, err := pages.Next(); !errors.Is(err, tiers.ErrDone) {
		t.Fatalf("Next after the last page: %v, want ErrDone", err)
	}
}

func TestRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	s, err := OpenInMemory(Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	rows := []tiers.Row{tiers.PointRow(storetest.Start().UnixMilli(), 1)}
	for _, k := range []tiers.PartitionKey{
		{Table: "nope", Series: "a"},
		{Table: tiers.TableRaw, Series: ""},
		{Table: tiers.TableRaw, Series: "a\x00b"},
		{Table: tiers.TableRaw, Series: "a", EventBucket: -1},
		{Table: tiers.TableRaw, Series: "a", EventBucket: tiers.MaxEventBuckets},
		{Table: "rollup_", Series: "a"},
		{Table: "rollup_1M", Series: "a"},
		{Table: "rollup_1m", Series: "a", EventBucket: 1},
	} {
		if err := s.Write(ctx, []tiers.PartitionWrite{{Key: k, Rows: rows}}); err == nil {
			t.Errorf("Write accepted key %+v", k)
		}
		if _, err := s.Read(ctx, tiers.ReadRequest{Key: k, Span: tiers.Span{From: 0, To: 1}}).Next(); err == nil || errors.Is(err, tiers.ErrDone) {
			t.Errorf("Read of key %+v: %v", k, err)
		}
	}
	if _, err := s.LookupSeries(ctx, "a\x00"); !errors.Is(err, tiers.ErrNotFound) {
		t.Errorf("LookupSeries of an impossible id: %v", err)
	}
}

// A second store on a directory in use is refused with a message that says
// so, not the lock's system error.
func TestOpenRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Now: storetest.Start})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	_, err = Open(dir, Options{Now: storetest.Start})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "in use by another gateway") {
		t.Fatalf("second Open: %v", err)
	}
}

// TestMain lets the test binary hold a store open in a child process, for
// the test of a directory locked by another process, and write and seal
// in one until it is killed (seal_crash_test.go).
func TestMain(m *testing.M) {
	if dir := os.Getenv("TSGATE_TEST_SEAL_CRASH_DIR"); dir != "" {
		sealCrashChild(dir)
	}
	if dir := os.Getenv("TSGATE_TEST_HOLD_DIR"); dir != "" {
		s, err := Open(dir, Options{Now: storetest.Start})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		fmt.Println("holding")
		_, _ = io.ReadAll(os.Stdin) // until the parent closes stdin
		_ = s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Another process holding the directory gets the same message as another
// store of this one (the system's lock error is "resource temporarily
// unavailable").
func TestOpenRefusesADirectoryHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TSGATE_TEST_HOLD_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = Open(dir, Options{Now: storetest.Start})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "in use by another gateway") {
		t.Fatalf("Open while another process holds the directory: %v", err)
	}
}

// openEarlierStore opens a copy of testdata/name, a store an earlier build
// wrote, and returns it with its directory.
func openEarlierStore(t *testing.T, name string) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/"+name)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{Now: storetest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// formatStamp is the format version the store is stamped with.
func formatStamp(t *testing.T, s *Store) int64 {
	t.Helper()
	v, closer, err := s.db.Get(formatKey)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return getInt64(v)
}

// TestOpensAStoreWrittenBeforeLabels opens a store written by the build
// before the label index (testdata/before-labels: three series with a
// raw partition each, one with a layout entry): it opens, reads as it
// did, its series have no labels, and labels set on it survive a reopen.
func TestOpensAStoreWrittenBeforeLabels(t *testing.T) {
	ctx := context.Background()
	s, dir := openEarlierStore(t, "before-labels")
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Hour)
	ids := []string{"old.a", "old.b", "old.c"}
	listed, err := s.ListSeries(ctx, "old.", "", 10)
	if err != nil || len(listed) != 3 {
		t.Fatalf("ListSeries: %+v, %v", listed, err)
	}
	for i, info := range listed {
		if info.ID != ids[i] || info.First != base || info.Last != base+1000 || info.Labels != nil {
			t.Errorf("listed %+v", info)
		}
	}
	info, err := s.LookupSeries(ctx, "old.b")
	if err != nil || info.Labels != nil || !slices.Equal(info.Layout, tiers.Layout{{Width: tiers.Hour, EventBuckets: 2}}) {
		t.Fatalf("LookupSeries: %+v, %v", info, err)
	}
	rows := readAll(t, s, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "old.c", Bucket: base}, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 10})
	if want := []tiers.Row{tiers.PointRow(base, 1), tiers.PointRow(base+1000, 2)}; !slices.Equal(rows, want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	if got, err := s.SeriesLabels(ctx, ids); err != nil || len(got) != 0 {
		t.Fatalf("SeriesLabels: %v, %v", got, err)
	}
	if got, err := s.LabelNames(ctx); err != nil || len(got) != 0 {
		t.Fatalf("LabelNames: %v, %v", got, err)
	}

	labels := tiers.Labels{"__name__": "cpu", "host": "a"}
	if err := s.SetLabels(ctx, "old.a", labels); err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	s, err = Open(dir, Options{Now: storetest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	if info, err := s.LookupSeries(ctx, "old.a"); err != nil || !info.Labels.Equal(labels) || info.First != base {
		t.Fatalf("after reopen: %+v, %v", info, err)
	}
	if got, err := s.Postings(ctx, "host", "a"); err != nil || !slices.Equal(got, []string{"old.a"}) {
		t.Fatalf("Postings after reopen: %v, %v", got, err)
	}
	if got, err := s.LabelNames(ctx); err != nil || !slices.Equal(got, []string{"__name__", "host"}) {
		t.Fatalf("LabelNames after reopen: %v, %v", got, err)
	}
}

// TestOpensAStoreWrittenBeforeExtras opens a store written by the build
// before rollup rows kept extras (testdata/before-extras: a series with
// raw points and a row in each rollup tier, format 1): it opens and is
// stamped with the current format; its rows read as before; read with extras, its
// rollup rows carry extras that know nothing, and a rewrite of a row
// gives it extras.
func TestOpensAStoreWrittenBeforeExtras(t *testing.T) {
	ctx := context.Background()
	s, dir := openEarlierStore(t, "before-extras")
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Day)
	raw := readAll(t, s, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "old.r", Bucket: tiers.AlignDown(base, tiers.Hour)},
		Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 10, Extras: true})
	if want := []tiers.Row{tiers.PointRow(base, 1), tiers.PointRow(base+10_000, 3), tiers.PointRow(base+70_000, 2)}; !slices.Equal(raw, want) {
		t.Fatalf("raw rows %v, want %v", raw, want)
	}
	minute := tiers.ReadRequest{Key: tiers.PartitionKey{Table: "rollup_1m", Series: "old.r", Bucket: base}, Span: tiers.Span{From: base, To: base + tiers.Day}, PageSize: 10}
	want := []tiers.Row{{T: base, Min: 1, Max: 3, Sum: 4, Count: 2}, {T: base + tiers.Minute, Min: 2, Max: 2, Sum: 2, Count: 1}}
	if rows := readAll(t, s, minute); !slices.Equal(rows, want) {
		t.Fatalf("minute rows %v, want %v", rows, want)
	}
	minute.Extras = true
	for i, r := range readAll(t, s, minute) {
		if r.X == nil || r.X.HasSketch() || r.X.HasCounter {
			t.Fatalf("row %d read with extras: %+v", i, r.X)
		}
		if _, ok := r.Quantile(0.5); ok {
			t.Fatalf("row %d has a quantile", i)
		}
		r.X = nil
		if r != want[i] {
			t.Fatalf("row %d: %v", i, r)
		}
	}
	for _, tc := range []struct {
		table  tiers.Table
		bucket int64
	}{{"rollup_1h", tiers.AlignDown(base, 30*tiers.Day)}, {"rollup_1d", tiers.AlignDown(base, 365*tiers.Day)}} {
		rows := readAll(t, s, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tc.table, Series: "old.r", Bucket: tc.bucket}, Span: tiers.Span{From: base, To: base + tiers.Hour}, PageSize: 10, Extras: true})
		if len(rows) != 1 || rows[0].X == nil || rows[0].X.HasSketch() || rows[0].Sum != 6 {
			t.Fatalf("%s: %+v", tc.table, rows)
		}
	}

	// The next rollup of the window writes it with extras.
	var fresh tiers.Row
	fresh.T = base
	for _, p := range raw[:2] {
		fresh.AddExtras(p)
	}
	if err := s.Write(ctx, []tiers.PartitionWrite{{Key: minute.Key, Retention: 30 * tiers.Day, Rows: []tiers.Row{fresh}}}); err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	s, err := Open(dir, Options{Now: storetest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(t, s)
	rows := readAll(t, s, minute)
	if q, ok := rows[0].Quantile(1); !ok || math.Abs(q-3) > 0.03 || !rows[0].X.HasCounter || rows[0].X.Counter.Inc != 2 {
		t.Fatalf("rewritten row: %+v %+v, q1 %g", rows[0], rows[0].X, q)
	}
	if rows[1].X.HasSketch() {
		t.Fatalf("the row not rewritten has extras: %+v", rows[1].X)
	}
	if v := formatStamp(t, s); v != formatVersion {
		t.Fatalf("format stamp %d after opening a format 1 store", v)
	}
}

// TestRefusesAnotherFormat: a store stamped with a format this build does
// not know is refused with the versions it reads.
func TestRefusesAnotherFormat(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Now: storetest.Start, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(formatKey, int64Value(formatVersion+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	if _, err := Open(dir, Options{Now: storetest.Start, SweepInterval: -1}); err == nil || !strings.Contains(err.Error(), "reads formats 1 to 4") {
		t.Fatalf("Open: %v", err)
	}
}
