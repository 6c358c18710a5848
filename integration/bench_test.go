//go:build integration

package integration

// Benchmarks of the gateway against a real Cassandra node. Each one sets up
// its own keyspace, loads its data before timing starts, and then runs
// explicit rounds in which the two sides of a comparison alternate, so
// that drift on a shared machine (compactions, other processes) hits both
// sides alike. They report medians over the rounds and the ratio of the
// medians with b.ReportMetric, and log every round; run them once:
//
//	make bench
//	go test -tags integration -run '^$' -bench . -benchtime 1x -timeout 60m ./integration/
//
// docs/benchmarks.md records the results and what they mean.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/scan"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

var (
	benchRounds   = flag.Int("bench.rounds", 5, "rounds of each interleaved comparison")
	benchTailRuns = flag.Int("bench.tail-runs", 200, "reads per budget in the tail latency benchmark")
	benchSources  = flag.String("bench.sources", "live,import,late", "how BenchmarkWarmCold's data is written: live, import, late (comma-separated)")
	benchGC       = flag.Bool("bench.gc", false, "collect garbage before each timed read of BenchmarkWarmCold")
)

// benchClock is the wall clock plus an offset that benchmarks move forward
// to let rollup log slots close without waiting.
type benchClock struct{ off atomic.Int64 }

func (c *benchClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *benchClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// benchGateway is the gateway assembled over the Cassandra store the way
// `gateway serve` assembles it — package gateway, production engine
// defaults — but without the partition cache, so every read goes to
// Cassandra, and with a clock the benchmark moves.
type benchGateway struct {
	*gateway.Gateway
	store   *cassandra.Store
	cfg     cassandra.Config
	pyramid tiers.Pyramid
	clock   *benchClock
}

// openBenchStore is a fresh store with the tiers of p, and its
// configuration.
func openBenchStore(b *testing.B, p tiers.Pyramid) (*cassandra.Store, cassandra.Config) {
	b.Helper()
	store, _, cfg := freshStore(b, p)
	return store, cfg
}

func newGateway(b *testing.B, store *cassandra.Store, cfg cassandra.Config, p tiers.Pyramid, qc query.Config) *benchGateway {
	b.Helper()
	clock := &benchClock{}
	gc := gateway.DefaultConfig()
	// No cache of any kind: what the benchmarks call cold.
	gc.Pyramid, gc.Query, gc.CacheBytes, gc.ResultsCacheBytes = p, qc, 0, 0
	gc.Rollup.Interval = 0
	gc.CursorKey = base64.StdEncoding.EncodeToString([]byte("benchmark cursor key, 32 bytes.."))
	if err := gc.Validate(); err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(context.Background(), store, gc, gateway.Options{Now: clock.Now, Logger: storeLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return &benchGateway{Gateway: g, store: store, cfg: cfg, pyramid: p, clock: clock}
}

// benchValue is a point's value: small integers, so that sums are exact in
// any order and answers can be compared for equality.
func benchValue(t int64) float64 { return float64((t / 1000) % 1000) }

// backfill loads one point every step over span through the write path, in
// batches, as history imports do.
func (g *benchGateway) backfill(b *testing.B, series string, span tiers.Span, step int64) int {
	b.Helper()
	return querytest.Backfill(b, g.Writer, series, span, step, benchValue)
}

// point is one raw point as a client keeps it.
type point struct {
	T int64
	V float64
}

// rounds runs the sides of a comparison rounds times, rotating which side
// goes first, and returns each side's durations.
func rounds(b *testing.B, n int, sides []string, run func(round int, side string) time.Duration) map[string][]time.Duration {
	b.Helper()
	out := map[string][]time.Duration{}
	logLoad(b, "before the rounds")
	defer logLoad(b, "after the rounds")
	for r := range n {
		var line []string
		for i := range sides {
			side := sides[(r+i)%len(sides)]
			d := run(r, side)
			out[side] = append(out[side], d)
			line = append(line, fmt.Sprintf("%s %s", side, d.Round(time.Microsecond)))
		}
		note(b, "round %d: %v", r+1, line)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// note prints a line of a benchmark's report. Not b.Logf: the testing
// package keeps only the first ten lines a benchmark logs.
func note(b *testing.B, format string, args ...any) {
	fmt.Printf("    %s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}

// logLoad logs the machine's load average: other processes on a shared
// machine take cores from both sides of a comparison.
func logLoad(b *testing.B, when string) {
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(l))
		if len(f) >= 3 {
			note(b, "load average %s: %s %s %s (%d CPUs)", when, f[0], f[1], f[2], runtime.NumCPU())
		}
	}
}

// cpuUse is the wall and CPU time of the runs of one side.
type cpuUse struct {
	runs             int
	wall, self, node time.Duration
}

// cpuMeter accounts wall and CPU time per side, to tell a side that waits
// from one that has the cores busy.
type cpuMeter map[string]*cpuUse

// time runs f and adds its wall and CPU time to side's.
func (m cpuMeter) time(side string, f func()) time.Duration {
	self0, node0 := cpuTimes()
	t0 := time.Now()
	f()
	d := time.Since(t0)
	self1, node1 := cpuTimes()
	c := m[side]
	if c == nil {
		c = &cpuUse{}
		m[side] = c
	}
	c.runs++
	c.wall += d
	c.self += self1 - self0
	c.node += node1 - node0
	return d
}

// log reports the CPU per run of each side, when the node's is known.
func (m cpuMeter) log(b *testing.B, sides []string) {
	if _, node := cpuTimes(); node < 0 {
		return
	}
	for _, side := range sides {
		c := m[side]
		if c == nil || c.runs == 0 {
			continue
		}
		n := time.Duration(c.runs)
		note(b, "%s: per run: wall %s, CPU of the benchmark process %s, of the Cassandra node %s; %.2f cores busy on average",
			side, (c.wall / n).Round(time.Millisecond), (c.self / n).Round(time.Millisecond), (c.node / n).Round(time.Millisecond),
			float64(c.self+c.node)/float64(c.wall))
	}
}

// cpuTimes returns the CPU time used so far by this process and, when the
// node was started by scripts/cassandra.sh on this machine, by the node.
func cpuTimes() (self, node time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	pid, err := os.ReadFile(filepath.Join("..", ".cassandra", "cassandra.pid"))
	if err != nil {
		return self, -1
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat"))
	if err != nil {
		return self, -1
	}
	// Fields after the command (which is in parentheses): utime and stime
	// are the 12th and 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return self, -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return self, time.Duration(ut+st) * 10 * time.Millisecond
}

// ---------------------------------------------------------------------------
// Fan-out: the gateway's raw read of 7 days against a client's loop that
// reads one partition after another.

// BenchmarkFanOut reads 7 days of 1 Hz raw points of one series — 168 hour
// buckets × 4 event buckets = 672 partitions, 604,800 points — through the
// engine, and with a loop written directly against the driver that reads
// each partition in turn (all pages), appends, and sorts at the end. Both
// read the same table at LOCAL_QUORUM with driver pages of 5,000 rows.
//
// The gateway side runs twice: as a client pages through it (limit
// 100,000, the default maximum, following 7 cursors) and as one page
// (maximum limit raised to 1,000,000).
func BenchmarkFanOut(b *testing.B) {
	p := tiers.DefaultPyramid()
	// Data starts on an hour boundary a little more than 7 days back.
	p.Raw().Retention = 8 * tiers.Day
	store, cfg := openBenchStore(b, p)
	qc := query.DefaultConfig()
	g := newGateway(b, store, cfg, p, qc)
	qc.MaxLimit = 1000000
	g1 := newGateway(b, store, cfg, p, qc)
	const series = "bench.fanout"
	end := tiers.AlignDown(g.clock.Now().UnixMilli(), tiers.Hour)
	span := tiers.Span{From: end - 7*tiers.Day, To: end}
	start := time.Now()
	n := g.backfill(b, series, span, tiers.Second)
	note(b, "loaded %d points in %s (%.0f points/s through Writer.Backfill)", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	buckets, partitions := p.Raw().DefaultLayout().CountBuckets(span)
	if n != 604800 || buckets != 168 || partitions != 672 {
		b.Fatalf("%d points in %d buckets, %d partitions; want 604800, 168, 672", n, buckets, partitions)
	}

	s := newSession(b)
	ctx := context.Background()
	pageSize := min(cfg.PageSize, qc.Scan.PageSize)
	seqRead := func(out []point) []point {
		return readSequential(b, ctx, s, cfg.Keyspace, series, span, p.Raw().DefaultLayout(), pageSize, out)
	}
	bufs := map[string][]point{}
	stats := map[string]query.Stats{}
	cpu := cpuMeter{}
	pages := map[string]int{}
	read := func(side string) time.Duration {
		out := bufs[side][:0]
		if out == nil {
			out = make([]point, 0, n)
		}
		d := cpu.time(side, func() {
			switch side {
			case "sequential":
				out = seqRead(out)
			case "gateway-cursors":
				var st query.Stats
				out, pages[side], st = readGateway(b, ctx, g.Engine, series, span, 100000, out)
				stats[side] = st
			case "gateway-one-page":
				var st query.Stats
				out, pages[side], st = readGateway(b, ctx, g1.Engine, series, span, 1000000, out)
				stats[side] = st
			}
		})
		if len(out) != n {
			b.Fatalf("%s read %d points, want %d", side, len(out), n)
		}
		bufs[side] = out
		return d
	}
	sides := []string{"sequential", "gateway-cursors", "gateway-one-page"}
	// Warm up (prepared statements, caches) and check that every side
	// returns exactly the points written, in order.
	for _, side := range sides {
		read(side)
	}
	for _, side := range sides {
		for i, pt := range bufs[side] {
			if want := span.From + int64(i)*tiers.Second; pt.T != want || pt.V != benchValue(want) {
				b.Fatalf("%s: point %d = %+v, want t=%d v=%v", side, i, pt, want, benchValue(want))
			}
		}
	}
	var res map[string][]time.Duration
	clear(cpu)
	for b.Loop() {
		res = rounds(b, *benchRounds, sides, func(_ int, side string) time.Duration { return read(side) })
	}
	// Where the time goes: a loop that waits for one partition at a time
	// leaves the cores idle, a fan-out keeps them busy.
	cpu.log(b, sides)
	seq := median(res["sequential"])
	for _, side := range sides {
		m := median(res[side])
		b.ReportMetric(ms(m), side+"-ms")
		b.ReportMetric(float64(n)/m.Seconds(), side+"-points/s")
		if side != "sequential" {
			b.ReportMetric(float64(seq)/float64(m), side+"-speedup-x")
			note(b, "%s: %d pages, %d buckets, %d partitions, %d rows read", side, pages[side], stats[side].Buckets, stats[side].Partitions, stats[side].RowsRead)
		}
	}
	note(b, "medians over %d rounds: sequential %s, gateway-cursors %s (%.2fx), gateway-one-page %s (%.2fx)",
		*benchRounds, seq.Round(time.Millisecond), median(res["gateway-cursors"]).Round(time.Millisecond),
		float64(seq)/float64(median(res["gateway-cursors"])), median(res["gateway-one-page"]).Round(time.Millisecond),
		float64(seq)/float64(median(res["gateway-one-page"])))
}

// readSequential is the loop of the seeds' examples: for each hour bucket,
// for each event bucket, one query, every page read, rows appended; then
// the rows are sorted client-side.
func readSequential(b *testing.B, ctx context.Context, s *gocql.Session, ks, series string, span tiers.Span, layout tiers.Layout, pageSize int, out []point) []point {
	cql := fmt.Sprintf("SELECT t, v FROM %s.%s WHERE series = ? AND bucket = ? AND eb = ? AND t >= ? AND t < ?", ks, tiers.TableRaw)
	for bucket := range layout.Buckets(span, false) {
		for eb := range bucket.EventBuckets {
			iter := s.Query(cql, series, bucket.Start, int16(eb), span.From, span.To).
				Consistency(gocql.LocalQuorum).PageSize(pageSize).IterContext(ctx)
			var pt point
			for iter.Scan(&pt.T, &pt.V) {
				out = append(out, pt)
			}
			if err := iter.Close(); err != nil {
				b.Fatalf("read bucket %d/%d: %v", bucket.Start, eb, err)
			}
		}
	}
	slices.SortFunc(out, func(a, b point) int { return cmp.Compare(a.T, b.T) })
	return out
}

// readGateway reads span's raw points through the engine, following
// cursors; it returns the points, the pages and the summed stats.
func readGateway(b *testing.B, ctx context.Context, e query.Engine, series string, span tiers.Span, limit int, out []point) ([]point, int, query.Stats) {
	req := query.Request{Series: series, From: params.At(span.From), To: params.At(span.To), Resolution: router.Resolution{Kind: router.RawPoints}, Limit: limit}
	var stats query.Stats
	for pages := 1; ; pages++ {
		res, err := e.Query(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		for res.Next() {
			it := res.Item()
			out = append(out, point{it.T, it.Row.Value()})
		}
		tr := res.Trailer()
		res.Close()
		if tr.Partial || tr.Err != nil {
			b.Fatalf("page %d cut short: %+v", pages, tr)
		}
		stats.Buckets += tr.Stats.Buckets
		stats.Partitions += tr.Stats.Partitions
		stats.RowsRead += tr.Stats.RowsRead
		if tr.NextCursor == "" {
			return out, pages, stats
		}
		req.Cursor = tr.NextCursor
	}
}

// ---------------------------------------------------------------------------
// Ingest: POST /v1/points against the driver's own batched writes.

const (
	ingestClients   = 4
	ingestBatches   = 20 // per client and round
	ingestBatchSize = 5000
	ingestInterval  = 5 * time.Millisecond // 200 Hz per series
)

// BenchmarkIngest writes the same number of points through POST /v1/points
// (JSON batches of 5,000 points, ingestClients clients at once, each
// posting its batches one after another into a series of its own, over a
// real HTTP server on the Cassandra store) and directly with the driver
// (the same clients and batches; each batch grouped by partition into
// UNLOGGED batches of at most MaxBatchRows rows, WriteParallelism of them
// in flight per client — the store's own settings — with the same INSERT
// ... USING TTL the store sends). Every round writes fresh series on both
// sides; points are 200 Hz and recent, so all of them are on time and go
// to the raw table.
func BenchmarkIngest(b *testing.B) {
	p := tiers.DefaultPyramid()
	store, cfg := openBenchStore(b, p)
	g := newGateway(b, store, cfg, p, query.DefaultConfig())
	srv := httpapi.New(httpapi.Deps{
		Engine: g.Engine, Writer: g.Writer, Registry: store, Rollups: g.Rollups,
		Ready: store.Ping, Now: g.clock.Now, Logger: storeLogger(),
	}, httpapi.DefaultConfig())
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ingestClients}}
	b.Cleanup(client.CloseIdleConnections)
	s := newSession(b)
	ctx := context.Background()
	layout := p.Raw().DefaultLayout()
	insert := fmt.Sprintf("INSERT INTO %s.%s (series, bucket, eb, t, v) VALUES (?, ?, ?, ?, ?) USING TTL ?", cfg.Keyspace, tiers.TableRaw)

	// pointsOf returns the batches of one client in one round: recent,
	// consecutive points of its own series.
	pointsOf := func(now int64) [][]point {
		start := now - 9*tiers.Minute
		batches := make([][]point, ingestBatches)
		t := start
		for i := range batches {
			batches[i] = make([]point, ingestBatchSize)
			for j := range batches[i] {
				batches[i][j] = point{t, math.Round((20+float64(t/10%977)/7)*100) / 100}
				t += ingestInterval.Milliseconds()
			}
		}
		return batches
	}
	total := ingestClients * ingestBatches * ingestBatchSize
	cpu := cpuMeter{}
	viaHTTP := func(round int) (time.Duration, []string) {
		now := time.Now().UnixMilli()
		bodies := make([][][]byte, ingestClients)
		var names []string
		for c := range bodies {
			name := fmt.Sprintf("bench.ingest.r%d.http.c%d", round, c)
			names = append(names, name)
			for _, batch := range pointsOf(now) {
				bodies[c] = append(bodies[c], jsonBody(name, batch))
			}
		}
		return cpu.time("http", func() {
			var eg errgroup.Group
			for c := range bodies {
				eg.Go(func() error {
					for _, body := range bodies[c] {
						if err := post(client, ts.URL+"/v1/points", "application/json", body); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := eg.Wait(); err != nil {
				b.Fatal(err)
			}
		}), names
	}
	direct := func(round int) (time.Duration, []string) {
		now := time.Now().UnixMilli()
		work := make([][][]point, ingestClients)
		var names []string
		for c := range work {
			name := fmt.Sprintf("bench.ingest.r%d.driver.c%d", round, c)
			names = append(names, name)
			work[c] = pointsOf(now)
		}
		return cpu.time("driver", func() {
			var eg errgroup.Group
			for c := range work {
				eg.Go(func() error {
					for _, batch := range work[c] {
						if err := writeDirect(ctx, s, insert, names[c], layout, p.Raw().Retention, batch, cfg.MaxBatchRows, cfg.WriteParallelism); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := eg.Wait(); err != nil {
				b.Fatal(err)
			}
		}), names
	}
	written := map[string][]string{}
	run := func(round int, side string) time.Duration {
		var d time.Duration
		var names []string
		if side == "http" {
			d, names = viaHTTP(round)
		} else {
			d, names = direct(round)
		}
		written[side] = append(written[side], names...)
		return d
	}
	sides := []string{"http", "driver"}
	// A warm-up round: connections, prepared statements, JIT on the node.
	run(-1, "http")
	run(-1, "driver")
	var res map[string][]time.Duration
	clear(cpu)
	for b.Loop() {
		res = rounds(b, *benchRounds, sides, run)
	}
	cpu.log(b, sides)
	// Both sides stored every point.
	for _, side := range sides {
		for _, name := range []string{written[side][0], written[side][len(written[side])-1]} {
			if got := countRaw(b, s, cfg.Keyspace, name, layout); got != ingestBatches*ingestBatchSize {
				b.Fatalf("%s: series %s holds %d points, want %d", side, name, got, ingestBatches*ingestBatchSize)
			}
		}
	}
	h, d := median(res["http"]), median(res["driver"])
	b.ReportMetric(float64(total)/h.Seconds(), "http-points/s")
	b.ReportMetric(float64(total)/d.Seconds(), "driver-points/s")
	b.ReportMetric(float64(d)/float64(h), "http/driver-x")
	note(b, "medians over %d rounds of %d points per side: POST /v1/points %s (%.0f points/s), driver %s (%.0f points/s): %.2fx",
		*benchRounds, total, h.Round(time.Millisecond), float64(total)/h.Seconds(), d.Round(time.Millisecond), float64(total)/d.Seconds(), float64(d)/float64(h))
}

// jsonBody encodes a batch as POST /v1/points takes it.
func jsonBody(series string, batch []point) []byte {
	buf := make([]byte, 0, len(batch)*64)
	buf = append(buf, `{"points":[`...)
	for i, pt := range batch {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"series":"`...)
		buf = append(buf, series...)
		buf = append(buf, `","t":`...)
		buf = strconv.AppendInt(buf, pt.T, 10)
		buf = append(buf, `,"v":`...)
		buf = strconv.AppendFloat(buf, pt.V, 'g', -1, 64)
		buf = append(buf, '}')
	}
	return append(buf, ']', '}')
}

// post sends body, of media type ct, and wants a 200.
func post(c *http.Client, url, ct string, body []byte) error {
	resp, err := c.Post(url, ct, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %.500s", url, resp.StatusCode, msg)
	}
	return nil
}

// writeDirect writes one batch of a series the way a careful client of the
// driver would: rows grouped by partition, UNLOGGED batches of at most
// maxRows rows that never span partitions, parallel batches in flight.
func writeDirect(ctx context.Context, s *gocql.Session, insert, series string, layout tiers.Layout, retention int64, batch []point, maxRows, parallel int) error {
	type key struct {
		bucket int64
		eb     int
	}
	parts := map[key][]point{}
	var order []key
	for _, pt := range batch {
		bucket, eb := layout.Locate(pt.T)
		k := key{bucket, eb}
		if _, ok := parts[k]; !ok {
			order = append(order, k)
		}
		parts[k] = append(parts[k], pt)
	}
	now := time.Now().UnixMilli()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, k := range order {
		for chunk := range slices.Chunk(parts[k], maxRows) {
			g.Go(func() error {
				bt := s.Batch(gocql.UnloggedBatch)
				for _, pt := range chunk {
					ttl := int((pt.T + retention - now + 999) / 1000)
					bt.Query(insert, series, k.bucket, int16(k.eb), pt.T, pt.V, ttl)
				}
				return bt.Consistency(gocql.LocalQuorum).ExecContext(gctx)
			})
		}
	}
	return g.Wait()
}

// countRaw counts the raw points of a series written by the ingest
// benchmark (its points all lie within the last hour or two).
func countRaw(b *testing.B, s *gocql.Session, ks, series string, layout tiers.Layout) int {
	now := time.Now().UnixMilli()
	total := 0
	for bucket := range layout.Buckets(tiers.Span{From: now - 3*tiers.Hour, To: now + tiers.Hour}, false) {
		for eb := range bucket.EventBuckets {
			var n int
			err := s.Query(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s WHERE series = ? AND bucket = ? AND eb = ?", ks, tiers.TableRaw),
				series, bucket.Start, int16(eb)).Scan(&n)
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
	}
	return total
}

// ---------------------------------------------------------------------------
// Pyramid: a 90-day dashboard read from the hour tier against the same
// windows re-aggregated from the minute tier.

// pyramid90 is the default pyramid with raw and minute retentions raised
// past 90 days, so that 90 days of history can be written and rolled up.
func pyramid90() tiers.Pyramid {
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 92 * tiers.Day
	p[1].Retention = 92 * tiers.Day
	return p
}

// BenchmarkPyramid loads 90 days of one point per minute (129,600 points),
// rolls them up with RunOnce(ctx, true), and then compares the dashboard
// query "last 90 days, resolution=auto" — which the router sends to the
// hour tier, at 1 h — with the same windows computed from the minute tier:
// scan.Scanner.ReadTier over the minute tier folded to 1 h by merge.Windower,
// which is what answering from the minute tier re-aggregated to 1 h does.
// Both sides must return the same windows.
func BenchmarkPyramid(b *testing.B) {
	p := pyramid90()
	store, cfg := openBenchStore(b, p)
	g := newGateway(b, store, cfg, p, query.DefaultConfig())
	const series = "bench.pyramid"
	end := tiers.AlignDown(g.clock.Now().UnixMilli(), tiers.Minute)
	n := g.backfill(b, series, tiers.Span{From: end - 90*tiers.Day, To: end}, tiers.Minute)
	if n != 129600 {
		b.Fatalf("loaded %d points, want 129600", n)
	}
	g.clock.Advance(5 * time.Minute)
	ctx := context.Background()
	rep, err := g.Rollups.RunOnce(ctx, true)
	if err != nil {
		b.Fatal(err)
	}
	note(b, "rollup of %d raw points: %s (%.0f raw points/s), windows %v, rows read %d", n, rep.Elapsed.Round(time.Millisecond), float64(n)/rep.Elapsed.Seconds(), rep.Windows, rep.RowsRead)

	now := g.clock.Now().UnixMilli()
	reqSpan := tiers.Span{From: now - 90*tiers.Day, To: now}
	type answer struct {
		windows []query.Item
		rows    int64
	}
	auto := func() answer {
		res, err := g.Engine.Query(ctx, query.Request{Series: series, From: params.At(reqSpan.From), To: params.At(reqSpan.To), Resolution: router.Resolution{Kind: router.Auto},
			Aggs: []query.Agg{query.Min, query.Max, query.Sum, query.Count}, Limit: query.DefaultConfig().MaxLimit})
		if err != nil {
			b.Fatal(err)
		}
		defer res.Close()
		if plan := res.Head().Plan; plan.TierName != "hour" || plan.Step != tiers.Hour {
			b.Fatalf("auto over 90 days planned tier %s step %d, want the hour tier at 1h", plan.TierName, plan.Step)
		}
		var a answer
		for res.Next() {
			a.windows = append(a.windows, res.Item())
		}
		tr := res.Trailer()
		if tr.Partial || tr.NextCursor != "" {
			b.Fatalf("auto answer cut short: %+v", tr)
		}
		a.rows = tr.Stats.RowsRead
		return a
	}
	read := tiers.Span{From: tiers.AlignUp(reqSpan.From, tiers.Hour), To: tiers.AlignUp(reqSpan.To, tiers.Hour)}
	fromMinutes := func() answer {
		// Looked up as the engine looks series up: through the cache.
		info, err := g.Series.LookupSeries(ctx, series)
		if err != nil {
			b.Fatal(err)
		}
		var stats partial.Stats
		stream, err := scan.New(g.store, g.pyramid, g.Config.Query.Scan, g.clock.Now).ReadTier(ctx, info, 1, read, false, &stats)
		if err != nil {
			b.Fatal(err)
		}
		defer stream.Close()
		win := merge.NewWindower(merge.Iterator[tiers.Row](stream), tiers.Hour,
			func(r tiers.Row) int64 { return r.T },
			func(acc *tiers.Row, r tiers.Row) { acc.Add(r) })
		var a answer
		for win.Next() {
			w := win.At()
			a.windows = append(a.windows, query.Item{T: w.Start, Row: w.Acc})
		}
		if err := win.Err(); err != nil {
			b.Fatal(err)
		}
		a.rows = stats.RowsRead.Load()
		return a
	}
	// The two must agree window by window.
	x, y := auto(), fromMinutes()
	if len(x.windows) != len(y.windows) || len(x.windows) < 2159 {
		b.Fatalf("hour tier: %d windows, minute tier: %d", len(x.windows), len(y.windows))
	}
	for i := range x.windows {
		xw, yw := x.windows[i], y.windows[i]
		xw.Row.T, yw.Row.T = 0, 0
		if xw != yw {
			b.Fatalf("window %d: hour tier %+v, minute tier %+v", i, xw, yw)
		}
	}
	rows := map[string]int64{}
	var res map[string][]time.Duration
	for b.Loop() {
		res = rounds(b, 2**benchRounds, []string{"hour-tier", "minute-tier"}, func(_ int, side string) time.Duration {
			t0 := time.Now()
			var a answer
			if side == "hour-tier" {
				a = auto()
			} else {
				a = fromMinutes()
			}
			d := time.Since(t0)
			rows[side] = a.rows
			return d
		})
	}
	h, m := median(res["hour-tier"]), median(res["minute-tier"])
	b.ReportMetric(ms(h), "hour-tier-ms")
	b.ReportMetric(ms(m), "minute-tier-ms")
	b.ReportMetric(float64(rows["hour-tier"]), "hour-tier-rows")
	b.ReportMetric(float64(rows["minute-tier"]), "minute-tier-rows")
	b.ReportMetric(float64(rows["minute-tier"])/float64(rows["hour-tier"]), "fewer-rows-x")
	b.ReportMetric(float64(m)/float64(h), "faster-x")
	b.ReportMetric(float64(n)/rep.Elapsed.Seconds(), "rollup-points/s")
	note(b, "%d windows; hour tier (auto): %d rows in %s; minute tier re-aggregated: %d rows in %s; %.1fx fewer rows, %.1fx faster",
		len(x.windows), rows["hour-tier"], h.Round(time.Microsecond), rows["minute-tier"], m.Round(time.Microsecond),
		float64(rows["minute-tier"])/float64(rows["hour-tier"]), float64(m)/float64(h))
}

// BenchmarkRollup times RunOnce(ctx, true) over freshly loaded raw points:
// 90 days at one point per minute, and 7 days at 1 Hz. Each round loads a
// new series, lets the rollup log slot close, and runs the rollups.
func BenchmarkRollup(b *testing.B) {
	cases := []struct {
		name  string
		p     tiers.Pyramid
		days  int64
		step  int64
		align int64
	}{
		{"data=90d-per-minute", pyramid90(), 90, tiers.Minute, tiers.Minute},
		{"data=7d-1Hz", func() tiers.Pyramid {
			p := tiers.DefaultPyramid()
			p.Raw().Retention = 8 * tiers.Day
			return p
		}(), 7, tiers.Second, tiers.Hour},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			store, cfg := openBenchStore(b, c.p)
			g := newGateway(b, store, cfg, c.p, query.DefaultConfig())
			ctx := context.Background()
			var elapsed []time.Duration
			var points int
			var last rollup.Report
			for b.Loop() {
				for r := range max(1, *benchRounds/2) {
					end := tiers.AlignDown(g.clock.Now().UnixMilli(), c.align)
					points = g.backfill(b, fmt.Sprintf("bench.rollup.r%d", r), tiers.Span{From: end - c.days*tiers.Day, To: end}, c.step)
					g.clock.Advance(5 * time.Minute)
					t0 := time.Now()
					rep, err := g.Rollups.RunOnce(ctx, true)
					if err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					if want := int64(points) / (tiers.Minute / c.step); rep.Windows["minute"] != want {
						b.Fatalf("round %d rewrote %d minute windows, want %d", r, rep.Windows["minute"], want)
					}
					elapsed = append(elapsed, d)
					last = rep
					note(b, "round %d: %d raw points rolled up in %s (%.0f points/s); windows %v, rows read %d",
						r+1, points, d.Round(time.Millisecond), float64(points)/d.Seconds(), rep.Windows, rep.RowsRead)
				}
			}
			m := median(elapsed)
			b.ReportMetric(ms(m), "rollup-ms")
			b.ReportMetric(float64(points)/m.Seconds(), "raw-points/s")
			b.ReportMetric(float64(last.RowsRead), "rows-read")
		})
	}
}

// ---------------------------------------------------------------------------
// Tail latency with and without a budget.

// BenchmarkTailLatency reads 2 days of 1 Hz raw points (48 buckets × 4 =
// 192 partitions, 172,800 points) in one page (maximum limit raised to
// 200,000) many times: without a budget, with a budget equal to the
// median of the no-budget reads so far (40 calibration reads after 20 to
// warm up, then the interleaved ones), and with a quarter of that. The
// three alternate run by run. It reports the latency percentiles of each,
// the share of answers that came back partial, and how much of the range
// the partial answers covered on average.
func BenchmarkTailLatency(b *testing.B) {
	p := tiers.DefaultPyramid()
	store, cfg := openBenchStore(b, p)
	qc := query.DefaultConfig()
	qc.MaxLimit = 200000
	g := newGateway(b, store, cfg, p, qc)
	const series = "bench.tail"
	end := tiers.AlignDown(g.clock.Now().UnixMilli(), tiers.Hour)
	span := tiers.Span{From: end - 2*tiers.Day, To: end}
	n := g.backfill(b, series, span, tiers.Second)
	if n != 172800 {
		b.Fatalf("loaded %d points", n)
	}
	ctx := context.Background()
	type run struct {
		latency time.Duration
		points  int
		partial bool
		covered float64
	}
	once := func(slo time.Duration) run {
		start := time.Now()
		res, err := g.Engine.Query(ctx, query.Request{Series: series, From: params.At(span.From), To: params.At(span.To), Resolution: router.Resolution{Kind: router.RawPoints},
			Limit: qc.MaxLimit, SLO: slo, Start: start})
		if err != nil {
			b.Fatal(err)
		}
		var r run
		for res.Next() {
			_ = res.Item()
			r.points++
		}
		tr := res.Trailer()
		r.latency = time.Since(start)
		res.Close()
		if tr.Err != nil || (tr.Partial && tr.Reason != "slo") {
			b.Fatalf("read failed: %+v", tr)
		}
		r.partial = tr.Partial
		r.covered = float64(tr.Covered.To-tr.Covered.From) / float64(span.To-span.From)
		if !tr.Partial && r.points != n {
			b.Fatalf("complete answer with %d points", r.points)
		}
		return r
	}
	// Warm up (the node's JIT, caches), then calibrate the budgets.
	for range 20 {
		once(0)
	}
	var calib []time.Duration
	for range 40 {
		calib = append(calib, once(0).latency)
	}
	note(b, "calibration: no-budget median %s over %d reads", median(calib).Round(time.Millisecond), len(calib))
	// The budgets follow the median of the no-budget reads so far — the
	// calibration, then the interleaved ones — so that "the no-budget p50"
	// is measured under the same conditions as the budgeted reads (which
	// leave the node some work of the reads they abandon).
	none := slices.Clone(calib)
	budgets := []struct {
		name string
		slo  func() time.Duration
	}{
		{"none", func() time.Duration { return 0 }},
		{"slo=p50", func() time.Duration { return median(none).Round(time.Millisecond) }},
		{"slo=p50/4", func() time.Duration { return median(none).Round(time.Millisecond) / 4 }},
	}
	runs := map[string][]run{}
	used := map[string][]time.Duration{}
	logLoad(b, "before the runs")
	defer logLoad(b, "after the runs")
	for b.Loop() {
		for i := range *benchTailRuns {
			for j := range budgets {
				bg := budgets[(i+j)%len(budgets)]
				slo := bg.slo()
				r := once(slo)
				runs[bg.name] = append(runs[bg.name], r)
				used[bg.name] = append(used[bg.name], slo)
				if slo == 0 {
					none = append(none, r.latency)
				}
			}
		}
	}
	for _, bg := range budgets {
		rs := runs[bg.name]
		lat := make([]time.Duration, len(rs))
		var partials int
		var covered float64
		var pts []int
		for i, r := range rs {
			lat[i] = r.latency
			pts = append(pts, r.points)
			if r.partial {
				partials++
				covered += r.covered
			}
		}
		slices.Sort(lat)
		slices.Sort(pts)
		meanCovered := math.NaN()
		if partials > 0 {
			meanCovered = covered / float64(partials)
		}
		b.ReportMetric(ms(percentile(lat, 0.5)), bg.name+"-p50-ms")
		b.ReportMetric(ms(percentile(lat, 0.99)), bg.name+"-p99-ms")
		b.ReportMetric(float64(partials)/float64(len(rs)), bg.name+"-partial-share")
		slos := slices.Clone(used[bg.name])
		slices.Sort(slos)
		note(b, "budget %-9s (%s to %s): %d reads: p50 %s p90 %s p99 %s max %s; partial %d (%.1f%%), mean covered fraction of partials %.3f; median points %d",
			bg.name, slos[0], slos[len(slos)-1], len(rs), percentile(lat, 0.5).Round(time.Microsecond), percentile(lat, 0.9).Round(time.Microsecond),
			percentile(lat, 0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond),
			partials, 100*float64(partials)/float64(len(rs)), meanCovered, pts[len(pts)/2])
	}
}
