package storetest

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// CrashStore is what the crash test writes, seals and reads.
type CrashStore interface {
	tiers.PartitionReader
	tiers.PartitionWriter
	tiers.Sealer
}

// The crash test's data: a few series, hourly buckets of the past (final,
// so the sealer may take them) of two event buckets each, points on a
// second grid so that writes often land on times written before.
const (
	crashSeries       = 3
	crashBuckets      = 6
	crashEventBuckets = 2
	crashRetention    = 100 * tiers.Day
)

// crashBucket is bucket i of the crash test, from its first, base, which
// the parent fixes for a run and hands to its children.
func crashBucket(base int64, i int) int64 { return base + int64(i)*tiers.Hour }

// crashRollup is the minute partition the crash test writes rollup rows
// to: that of the day of the first bucket.
func crashRollup(base int64, series string) tiers.PartitionKey {
	return tiers.PartitionKey{Table: tiers.RollupTable(tiers.Minute), Series: series, Bucket: tiers.AlignDown(base, tiers.Day)}
}

// crashWrite is write number id: the same points in the parent and the
// child, derived from the id alone. Some write a bucket that is sealed
// already (an import, a late point), some rewrite times written before.
// Each also writes a few rollup rows with extras to the series' minute
// partition (crashRollup), new windows and rewrites of windows, sealed
// or not, as corrections do.
func crashWrite(base int64, id int) []tiers.PartitionWrite {
	r := rand.New(rand.NewPCG(uint64(id), 77))
	series := fmt.Sprintf("crash.%d", r.IntN(crashSeries))
	bucket := crashBucket(base, r.IntN(crashBuckets))
	writes := make([]tiers.PartitionWrite, crashEventBuckets)
	for eb := range writes {
		writes[eb] = tiers.PartitionWrite{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket, EventBucket: eb}, Retention: crashRetention}
	}
	seen := map[int64]bool{}
	for range 1 + r.IntN(200) {
		t := bucket + int64(r.IntN(3600))*tiers.Second
		if seen[t] {
			continue
		}
		seen[t] = true
		eb := tiers.EventBucket(t, crashEventBuckets)
		writes[eb].Rows = append(writes[eb].Rows, tiers.PointRow(t, math.Round(r.NormFloat64()*1e5)/1e3))
	}
	rollup := tiers.PartitionWrite{Key: crashRollup(base, series), Retention: crashRetention}
	windows := map[int64]bool{}
	for range 1 + r.IntN(20) {
		t := rollup.Key.Bucket + int64(r.IntN(300))*tiers.Minute
		if windows[t] {
			continue
		}
		windows[t] = true
		row := tiers.Row{T: t}
		for k := range 1 + r.IntN(6) {
			row.AddExtras(tiers.PointRow(t+int64(k)*10*tiers.Second, math.Round(r.NormFloat64()*1e5)/1e3))
		}
		row.X = row.X.Compact(row)
		rollup.Rows = append(rollup.Rows, row)
	}
	writes = append(writes, rollup)
	for _, w := range writes {
		// A partition write's rows ascend.
		slices.SortFunc(w.Rows, func(a, b tiers.Row) int { return cmp.Compare(a.T, b.T) })
	}
	return writes
}

// CrashChildEnv is set, to the crash test's parameters, in the
// environment of the child processes RunSealCrash starts; a test binary's
// TestMain that finds it opens its store and calls SealCrashChild.
const CrashChildEnv = "TSGATE_TEST_SEAL_CRASH"

// SealCrashChild runs in a child process of RunSealCrash until it is
// killed: it writes the crash test's writes from the one its environment
// names on — saying "begin id" before and "ack id" once Write returned —
// while a second goroutine seals random buckets and minute partitions
// without pause.
func SealCrashChild(s CrashStore) {
	var base int64
	var from int
	if _, err := fmt.Sscan(os.Getenv(CrashChildEnv), &base, &from); err != nil {
		fmt.Println("environment:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	go func() {
		r := rand.New(rand.NewPCG(uint64(from), 5))
		for {
			series := fmt.Sprintf("crash.%d", r.IntN(crashSeries))
			var err error
			if r.IntN(3) == 0 {
				_, err = s.SealRollup(ctx, crashRollup(base, series), crashRetention)
			} else {
				_, err = s.SealBucket(ctx, series, crashBucket(base, r.IntN(crashBuckets)), crashEventBuckets, crashRetention)
			}
			if err != nil {
				fmt.Println("seal:", err)
				os.Exit(1)
			}
		}
	}()
	fmt.Println("ready")
	for id := from; ; id++ {
		fmt.Println("begin", id)
		if err := s.Write(ctx, crashWrite(base, id)); err != nil {
			fmt.Println("write:", err)
			os.Exit(1)
		}
		fmt.Println("ack", id)
	}
}

// RunSealCrash proves that a gateway killed with SIGKILL while it writes
// and seals loses no acknowledged point or rollup row, duplicates none,
// and keeps every rewrite's value:
// after each of several kills at random moments, every bucket reads as
// the brute-force replay of the acknowledged writes (a write begun but
// not acknowledged may or may not have landed), before and after a last
// seal.
//
// command returns a fresh command of the test binary that runs
// SealCrashChild on the store (the environment RunSealCrash adds to it
// tells the child to); open opens the store in the test once the children
// are gone.
func RunSealCrash(t *testing.T, command func() *exec.Cmd, open func() CrashStore) {
	base := tiers.AlignDown(time.Now().UnixMilli(), tiers.Hour) - (crashBuckets+2)*tiers.Hour
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	acked, next := []int{}, 0
	var pending []int // begun, not acknowledged, in the order begun
	for round := range 4 {
		cmd := command()
		cmd.Env = append(cmd.Environ(), fmt.Sprintf("%s=%d %d", CrashChildEnv, base, next))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || lines.Text() != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: the child said %q", round, lines.Text())
		}
		killAt := time.Duration(100+r.IntN(900)) * time.Millisecond
		timer := time.AfterFunc(killAt, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		var begun []int
		ackedNow := map[int]bool{}
		for lines.Scan() {
			word, arg, _ := strings.Cut(lines.Text(), " ")
			id, err := strconv.Atoi(arg)
			switch {
			case err == nil && word == "begin":
				begun = append(begun, id)
			case err == nil && word == "ack":
				ackedNow[id] = true
				acked = append(acked, id)
			default:
				timer.Stop()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("round %d: the child said %q", round, lines.Text())
			}
		}
		timer.Stop()
		_ = cmd.Wait()
		for _, id := range begun {
			if !ackedNow[id] {
				pending = append(pending, id)
			}
			next = max(next, id+1)
		}
		t.Logf("round %d: killed after %v, %d writes acknowledged", round, killAt, len(ackedNow))
	}
	if len(acked) < 10 {
		t.Fatalf("only %d writes acknowledged over the rounds: the test proves little", len(acked))
	}
	checkCrashStore(t, open(), base, acked, pending)
}

// checkCrashStore reads every bucket of the crash test's store, seals it,
// and reads it again; both reads must be the replay of the acknowledged
// writes, where a pending write's point may stand instead of what it
// would have overwritten.
func checkCrashStore(t *testing.T, s CrashStore, base int64, acked, pending []int) {
	t.Helper()
	if c, ok := s.(io.Closer); ok {
		defer func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	// want[series][t] is the value of the last acknowledged write of t;
	// maybe[series][t] the values a pending write may have left instead.
	// Writes are applied in id order: the writer is sequential.
	type key struct {
		series string
		t      int64
	}
	want := map[key]float64{}
	maybe := map[key][]float64{}
	// The same of the rollup rows, whole.
	wantRows := map[key]tiers.Row{}
	maybeRows := map[key][]tiers.Row{}
	isPending := map[int]bool{}
	for _, id := range pending {
		isPending[id] = true
	}
	ids := append(append([]int{}, acked...), pending...)
	slices.Sort(ids)
	for _, id := range ids {
		for _, w := range crashWrite(base, id) {
			if w.Key.Table != tiers.TableRaw {
				for _, row := range w.Rows {
					k := key{w.Key.Series, row.T}
					if isPending[id] {
						maybeRows[k] = append(maybeRows[k], row)
					} else {
						wantRows[k] = row
						delete(maybeRows, k)
					}
				}
				continue
			}
			for _, row := range w.Rows {
				k := key{w.Key.Series, row.T}
				if isPending[id] {
					maybe[k] = append(maybe[k], row.Value())
				} else {
					want[k] = row.Value()
					delete(maybe, k) // an acknowledged write after it decides
				}
			}
		}
	}
	ctx := context.Background()
	for pass := range 2 {
		got := map[key]float64{}
		for i := range crashSeries {
			series := fmt.Sprintf("crash.%d", i)
			for b := range crashBuckets {
				bucket := crashBucket(base, b)
				for eb := range crashEventBuckets {
					rows, _, err := ReadAll(s.Read(ctx, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: series, Bucket: bucket, EventBucket: eb}, Span: tiers.Span{From: bucket, To: bucket + tiers.Hour}, PageSize: 97}))
					if err != nil {
						t.Fatal(err)
					}
					for i, row := range rows {
						if i > 0 && row.T <= rows[i-1].T {
							t.Fatalf("pass %d: %s bucket %d eb %d: %d after %d (a duplicate or disorder)", pass, series, b, eb, row.T, rows[i-1].T)
						}
						got[key{series, row.T}] = row.Value()
					}
				}
				if pass == 0 {
					if _, err := s.SealBucket(ctx, series, bucket, crashEventBuckets, crashRetention); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		gotRows := map[key]tiers.Row{}
		for i := range crashSeries {
			series := fmt.Sprintf("crash.%d", i)
			pk := crashRollup(base, series)
			rows, _, err := ReadAll(s.Read(ctx, tiers.ReadRequest{Key: pk, Span: tiers.Span{From: pk.Bucket, To: pk.Bucket + tiers.Day}, PageSize: 13, Extras: true}))
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range rows {
				if i > 0 && row.T <= rows[i-1].T {
					t.Fatalf("pass %d: %s minute partition: %d after %d (a duplicate or disorder)", pass, series, row.T, rows[i-1].T)
				}
				gotRows[key{series, row.T}] = row
			}
			if pass == 0 {
				if _, err := s.SealRollup(ctx, pk, crashRetention); err != nil {
					t.Fatal(err)
				}
			}
		}
		sameAsOneOf := func(g tiers.Row, rows []tiers.Row) bool {
			return slices.ContainsFunc(rows, func(w tiers.Row) bool { return tiers.SameRow(g, w) })
		}
		for k, w := range wantRows {
			g, ok := gotRows[k]
			if !ok {
				t.Fatalf("pass %d: acknowledged rollup row %s@%d lost", pass, k.series, k.t)
			}
			if !tiers.SameRow(g, w) && !sameAsOneOf(g, maybeRows[k]) {
				t.Fatalf("pass %d: rollup row %s@%d is %+v, acknowledged %+v", pass, k.series, k.t, g, w)
			}
		}
		for k, g := range gotRows {
			if _, ok := wantRows[k]; !ok && !sameAsOneOf(g, maybeRows[k]) {
				t.Fatalf("pass %d: rollup row %s@%d = %+v was never written", pass, k.series, k.t, g)
			}
		}
		for k, v := range want {
			g, ok := got[k]
			if !ok {
				t.Fatalf("pass %d: acknowledged point %s@%d lost", pass, k.series, k.t)
			}
			if g != v && !slices.Contains(maybe[k], g) {
				t.Fatalf("pass %d: %s@%d is %v, acknowledged %v (pending %v)", pass, k.series, k.t, g, v, maybe[k])
			}
		}
		for k, g := range got {
			if _, ok := want[k]; ok {
				continue
			}
			if !slices.Contains(maybe[k], g) {
				t.Fatalf("pass %d: %s@%d = %v was never written", pass, k.series, k.t, g)
			}
		}
		t.Logf("pass %d: %d points, %d rollup rows, %d acknowledged writes, %d pending", pass, len(got), len(gotRows), len(acked), len(pending))
	}
}
