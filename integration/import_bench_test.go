//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
)

// Import: `gateway import` of an NDJSON file of history into Cassandra —
// the whole command, as a user runs it: process start, store open, decode,
// batches cut between windows, the backfill path into the raw partitions,
// checkpoints — against the raw driver writing the same points in the same
// UNLOGGED single-partition batches, as many at once (importSeries
// clients, each the store's write parallelism).
const (
	importSeries = 4
	importPoints = 50000 // per series and round
	importStep   = time.Second
)

func BenchmarkImport(b *testing.B) {
	p := tiers.DefaultPyramid()
	store, s, cfg := freshStore(b, p)
	_ = store
	ctx := context.Background()
	dir := b.TempDir()
	bin := filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/gateway").CombinedOutput(); err != nil {
		b.Fatalf("build the gateway: %v\n%s", err, out)
	}
	layout := p.Tier(tiers.LevelRaw).DefaultLayout()
	insert := fmt.Sprintf("INSERT INTO %s.%s (series, bucket, eb, t, v) VALUES (?, ?, ?, ?, ?) USING TTL ?", cfg.Keyspace, tiers.TableRaw)
	total := importSeries * importPoints

	// History a few days old, beyond the lateness window: POST /v1/points
	// would send all of it to the late table.
	historyOf := func() []point {
		start := tiers.AlignDown(time.Now().Add(-5*24*time.Hour).UnixMilli(), tiers.Hour)
		pts := make([]point, importPoints)
		for i := range pts {
			t := start + int64(i)*importStep.Milliseconds()
			pts[i] = point{t, benchValue(t)}
		}
		return pts
	}
	writeFile := func(path string, names []string) {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for _, name := range names {
			for _, pt := range historyOf() {
				fmt.Fprintf(w, `{"series":"%s","t":%d,"v":%s}`+"\n", name, pt.T, strconv.FormatFloat(pt.V, 'g', -1, 64))
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	args := []string{"import", "--store", "cassandra", "--cassandra-hosts", strings.Join(cfg.Hosts, ","), "--keyspace", cfg.Keyspace,
		"--cassandra-local-dc", cfg.LocalDC, "--cassandra-consistency", cfg.Consistency, "--rollups=false", "--progress-interval", "1h"}
	// Every round's input is written before the rounds, and synced, so
	// that no round competes with the writeback of its own file.
	namesOf := func(round int) []string {
		var names []string
		for c := range importSeries {
			names = append(names, fmt.Sprintf("bench.import.r%d.cli.s%d", round, c))
		}
		return names
	}
	pathOf := func(round int) string { return filepath.Join(dir, fmt.Sprintf("r%d.ndjson", round)) }
	for round := -1; round < *benchRounds; round++ {
		writeFile(pathOf(round), namesOf(round))
	}
	if err := exec.Command("sync").Run(); err != nil {
		b.Fatal(err)
	}
	// The import's own time, from its summary: from the store open to
	// the last batch, without starting the process and connecting.
	var importOwn []time.Duration
	viaImport := func(round int) (time.Duration, []string) {
		names, path := namesOf(round), pathOf(round)
		cmd := exec.Command(bin, append(args, path)...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("gateway import: %v\n%s", err, out)
		}
		m := regexp.MustCompile(fmt.Sprintf(`import: %d points in ([^:]+):`, total)).FindSubmatch(out)
		if m == nil {
			b.Fatalf("gateway import did not report %d points:\n%s", total, out)
		}
		own, err := time.ParseDuration(string(m[1]))
		if err != nil {
			b.Fatalf("gateway import's time %q: %v", m[1], err)
		}
		importOwn = append(importOwn, own)
		return d, names
	}
	direct := func(round int) (time.Duration, []string) {
		var names []string
		work := make([][]point, importSeries)
		for c := range importSeries {
			names = append(names, fmt.Sprintf("bench.import.r%d.driver.s%d", round, c))
			work[c] = historyOf()
		}
		start := time.Now()
		var eg errgroup.Group
		for c := range work {
			eg.Go(func() error {
				for lo := 0; lo < len(work[c]); lo += 5000 {
					batch := work[c][lo:min(lo+5000, len(work[c]))]
					if err := writeDirect(ctx, s, insert, names[c], layout, p.Tier(tiers.LevelRaw).Retention, batch, cfg.MaxBatchRows, cfg.WriteParallelism); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := eg.Wait(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), names
	}
	written := map[string][]string{}
	run := func(round int, side string) time.Duration {
		var d time.Duration
		var names []string
		if side == "import" {
			d, names = viaImport(round)
		} else {
			d, names = direct(round)
		}
		written[side] = append(written[side], names...)
		return d
	}
	sides := []string{"import", "driver"}
	run(-1, "import") // warm-up: page cache, JIT on the node
	run(-1, "driver")
	var res map[string][]time.Duration
	for b.Loop() {
		res = rounds(b, *benchRounds, sides, run)
	}
	// Both sides stored every point, in the raw table.
	span := tiers.Span{From: historyOf()[0].T, To: historyOf()[importPoints-1].T + 1}
	for _, side := range sides {
		for _, name := range []string{written[side][0], written[side][len(written[side])-1]} {
			n := 0
			for bucket := range layout.Buckets(span, false) {
				for eb := range bucket.EventBuckets {
					var c int
					if err := s.Query(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s WHERE series = ? AND bucket = ? AND eb = ?", cfg.Keyspace, tiers.TableRaw),
						name, bucket.Start, int16(eb)).Scan(&c); err != nil {
						b.Fatal(err)
					}
					n += c
				}
			}
			if n != importPoints {
				b.Fatalf("%s: series %s holds %d raw points, want %d", side, name, n, importPoints)
			}
		}
	}
	im, d := median(res["import"]), median(res["driver"])
	own := median(importOwn[len(importOwn)-len(res["import"]):])
	b.ReportMetric(float64(d)/float64(own), "import-after-connect/driver-x")
	note(b, "the import's own time after the store is open (median): %s, %.0f points/s: %.2fx the driver", own.Round(time.Millisecond), float64(total)/own.Seconds(), float64(d)/float64(own))
	b.ReportMetric(float64(total)/im.Seconds(), "import-points/s")
	b.ReportMetric(float64(total)/d.Seconds(), "driver-points/s")
	b.ReportMetric(float64(d)/float64(im), "import/driver-x")
	note(b, "medians over %d rounds of %d points per side: gateway import %s (%.0f points/s), driver %s (%.0f points/s): %.2fx",
		*benchRounds, total, im.Round(time.Millisecond), float64(total)/im.Seconds(), d.Round(time.Millisecond), float64(total)/d.Seconds(), float64(d)/float64(im))
}
