// Command benchpeers sets the gateway (embedded store) beside
// VictoriaMetrics single-node and Prometheus on the same generated data:
// it loads the data into each the way its users would, checks that the
// three answer every panel alike, then times the panels warm, cold and on
// a refreshing dashboard, and prints the ratios as a Markdown report.
// scripts/bench-peers.sh (make bench-peers) runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	scratch       string
	series        int
	days          int
	seed          uint64
	reps          int
	refreshes     int
	refreshEvery  time.Duration
	cold          bool
	timeout       time.Duration
	gatewayBin    string
	victoriaBin   string
	prometheusBin string
	promtoolBin   string
	basePort      int
	out           string
	// The gateway's store (see store.go).
	store, cassandraHosts, cassandraData, keyspace string
	// nodetool runs Cassandra's nodetool against the node (words split
	// on spaces); empty: the keyspace is measured uncompacted.
	nodetool string
}

func main() {
	var c config
	flag.StringVar(&c.scratch, "scratch", "", "scratch directory for the data set and the servers' data (required; emptied first)")
	flag.IntVar(&c.series, "series", 20, "series of the data set (panels read one series and all of them)")
	flag.IntVar(&c.days, "days", 90, "days of history, one point every 10 s per series, ending at today's 00:00 UTC")
	flag.Uint64Var(&c.seed, "seed", 28, "seed of the generated values")
	flag.IntVar(&c.reps, "reps", 15, "timed repetitions of each warm panel per side (the median is reported)")
	flag.IntVar(&c.refreshes, "refreshes", 12, "refreshes of the dashboard timed after the first")
	flag.DurationVar(&c.refreshEvery, "refresh-every", 10*time.Second, "dashboard refresh interval")
	flag.BoolVar(&c.cold, "cold", true, "time each panel's first read after a restart of every server")
	flag.DurationVar(&c.timeout, "timeout", 45*time.Minute, "give up (and stop every server) after this long")
	flag.StringVar(&c.gatewayBin, "gateway", "bin/gateway", "the gateway binary")
	flag.StringVar(&c.victoriaBin, "victoria", "/usr/bin/victoria-metrics", "the VictoriaMetrics binary")
	flag.StringVar(&c.prometheusBin, "prometheus", "/usr/bin/prometheus", "the Prometheus binary")
	flag.StringVar(&c.promtoolBin, "promtool", "/usr/bin/promtool", "promtool")
	flag.IntVar(&c.basePort, "port", 18480, "first of three loopback ports: gateway, VictoriaMetrics, Prometheus")
	flag.StringVar(&c.out, "out", "", "also write the report to this file")
	flag.StringVar(&c.store, "store", "embedded", "the gateway's store: embedded, or cassandra (the node at -cassandra-hosts)")
	hosts := os.Getenv("CASSANDRA_HOSTS")
	if hosts == "" {
		hosts = "127.0.0.1:9042"
	}
	flag.StringVar(&c.cassandraHosts, "cassandra-hosts", hosts, "the Cassandra node of -store cassandra, loopback only (default $CASSANDRA_HOSTS, as scripts/cassandra.sh run sets it)")
	flag.StringVar(&c.nodetool, "nodetool", "", "the command running nodetool against the node (\"scripts/cassandra.sh nodetool\"), to flush and compact the keyspace before its bytes are counted")
	flag.StringVar(&c.cassandraData, "cassandra-data", ".cassandra/node/data", "the node's data directory, where the keyspace's bytes on disk are counted")
	flag.StringVar(&c.keyspace, "keyspace", "benchpeers", "the gateway's keyspace on the node, dropped and created anew by every run")
	flag.Parse()
	if c.scratch == "" || c.series < 1 || c.days < 1 || c.reps < 1 || c.refreshes < 1 {
		fmt.Fprintln(os.Stderr, "benchpeers: -scratch is required; -series, -days, -reps and -refreshes must be at least 1")
		os.Exit(2)
	}
	if c.store != "embedded" && c.store != "cassandra" {
		fmt.Fprintf(os.Stderr, "benchpeers: -store must be embedded or cassandra, not %q\n", c.store)
		os.Exit(2)
	}
	if c.store == "cassandra" && !loopbackHosts(c.cassandraHosts) {
		fmt.Fprintf(os.Stderr, "benchpeers: -cassandra-hosts must be loopback addresses (127.0.0.0/8), not %q\n", c.cassandraHosts)
		os.Exit(2)
	}
	c.cassandraData = mustAbs(c.cassandraData)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stopSignals()
	cancel()
	stopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

// bench is one run: the data set, the servers and what was measured.
type bench struct {
	c       config
	d       dataset
	in      inputs
	gw      *server
	vm      *server
	prom    *server
	ep      endpoints
	client  *http.Client
	panels  []panel
	loads   [3]load
	serving [3]int64 // peak RSS while serving the warm panels
	dashRSS [3]int64
	rows    []row
	notes   []string
	// differs names, by panel, the sides whose answers differed from
	// Prometheus' in the check: they are not timed on that panel.
	differs map[string]*[nSides]bool
	failed  bool
}

// load is what loading the data set cost one side.
type load struct {
	dur  time.Duration
	disk int64
	// wal is the part of disk that is write-ahead logs (see diskUse).
	wal   int64
	rss   int64
	notes string
}

// row is one line of the report: a panel's median per side.
type row struct {
	panel panel
	mode  string
	med   [nSides]time.Duration
	n     int
}

func run(ctx context.Context, c config) error {
	for _, bin := range []string{c.gatewayBin, c.victoriaBin, c.prometheusBin, c.promtoolBin} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("missing binary: %w", err)
		}
	}
	scratch, err := filepath.Abs(c.scratch)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(scratch); err != nil {
		return err
	}
	for _, d := range []string{"data", "logs", "gateway", "victoria", "prometheus/data"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o755); err != nil {
			return err
		}
	}
	pidFile = filepath.Join(scratch, "pids")
	c.scratch = scratch
	end := time.Now().UTC().Truncate(24 * time.Hour)
	b := &bench{c: c, d: dataset{series: c.series, start: end.AddDate(0, 0, -c.days), end: end, seed: c.seed}}
	b.client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 8}}
	url := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }
	logs := filepath.Join(scratch, "logs")
	b.gw = &server{name: "gateway", bin: mustAbs(c.gatewayBin), dir: scratch, log: filepath.Join(logs, "gateway.log"),
		url: url(c.basePort), ready: "/readyz"}
	b.gw.args = gatewayArgs(c, false)
	b.vm = &server{name: "VictoriaMetrics", bin: c.victoriaBin, dir: filepath.Join(scratch, "victoria"), log: filepath.Join(logs, "victoria.log"),
		url: url(c.basePort + 1), ready: "/health", args: []string{
			"-storageDataPath=" + filepath.Join(scratch, "victoria", "data"),
			"-retentionPeriod=10y",
			"-httpListenAddr=127.0.0.1:" + strconv.Itoa(c.basePort+1),
			// Data up to now is answered (30 s back by default): the
			// refreshing dashboard asks for the last windows.
			"-search.latencyOffset=0s",
		}}
	promData := filepath.Join(scratch, "prometheus", "data")
	promConfig := filepath.Join(scratch, "prometheus", "prometheus.yml")
	b.prom = &server{name: "Prometheus", bin: c.prometheusBin, dir: filepath.Join(scratch, "prometheus"), log: filepath.Join(logs, "prometheus.log"),
		url: url(c.basePort + 2), ready: "/-/ready", args: []string{
			"--config.file=" + promConfig,
			"--storage.tsdb.path=" + promData,
			"--storage.tsdb.retention.time=400d",
			"--web.listen-address=127.0.0.1:" + strconv.Itoa(c.basePort+2),
			"--web.enable-remote-write-receiver",
		}}
	if err := os.WriteFile(promConfig, []byte("global:\n  scrape_interval: 15s\n"), 0o644); err != nil {
		return err
	}
	b.ep = endpoints{gwNative: b.gw.url, gwPromQL: b.gw.url + "/prometheus", victoria: b.vm.url, prometheus: b.prom.url}
	b.panels = []panel{
		{name: "last 1 h raw", rng: time.Hour, raw: true},
		{name: "24 h", rng: 24 * time.Hour},
		{name: "7 d", rng: 7 * 24 * time.Hour},
		{name: fmt.Sprintf("%d d", c.days), rng: time.Duration(c.days) * 24 * time.Hour},
	}
	if c.days <= 7 {
		b.panels = b.panels[:3]
	}
	for _, p := range slices.Clone(b.panels) {
		p.all, p.series = true, c.series
		b.panels = append(b.panels, p)
	}

	logf("data set: %d series × %d days at %s = %d points, %s to %s", c.series, c.days, interval, b.d.total(),
		b.d.start.Format(time.RFC3339), b.d.end.Format(time.RFC3339))
	t0 := time.Now()
	if b.in, err = b.d.write(filepath.Join(scratch, "data")); err != nil {
		return fmt.Errorf("writing the data set: %w", err)
	}
	logf("inputs written in %.1f s", time.Since(t0).Seconds())

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"load the gateway", b.loadGateway},
		{"load VictoriaMetrics", b.loadVictoria},
		{"load Prometheus", b.loadPrometheus},
		{"check the answers", b.check},
		{"warm panels", b.warm},
		{"cold panels", b.coldPanels},
		{"refreshing dashboard", b.dashboard},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		logf("== %s", s.name)
		t := time.Now()
		if err := s.fn(ctx); err != nil {
			b.report(os.Stdout)
			return fmt.Errorf("%s: %w", s.name, err)
		}
		logf("   %s took %.1f s", s.name, time.Since(t).Seconds())
	}
	b.report(os.Stdout)
	if c.out != "" {
		f, err := os.Create(c.out)
		if err != nil {
			return err
		}
		b.report(f)
		if err := f.Close(); err != nil {
			return err
		}
	}
	if b.failed {
		return fmt.Errorf("answers differ from Prometheus' (see the notes): %w", errMismatch)
	}
	return nil
}

// gatewayArgs are the flags of `gateway serve`: its store, and with
// resultsCache false no results cache (the warm and cold panels time what
// each side computes; the refreshing dashboard has every cache on).
func gatewayArgs(c config, resultsCache bool) []string {
	args := append([]string{"serve"}, c.storeFlags()...)
	args = append(args, "--addr", "127.0.0.1:"+strconv.Itoa(c.basePort))
	if !resultsCache {
		args = append(args, "--results-cache-bytes", "0")
	}
	return args
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// loadGateway runs `gateway import` into the gateway's store, rollups
// included, as a user moving history into the gateway would.
func (b *bench) loadGateway(ctx context.Context) error {
	if err := b.prepareStore(ctx); err != nil {
		return err
	}
	args := append([]string{"import"}, b.c.storeFlags()...)
	if b.c.store == "cassandra" {
		// Nobody reads the keyspace while it is imported into, so the rows
		// its seals keep for reads in flight need not wait the default
		// ten minutes before the gateway's seal worker deletes them.
		args = append(args, "--cassandra-sealed-rows-grace", sealedRowsGrace.String())
	}
	d, rss, err := runTool(ctx, filepath.Join(filepath.Dir(b.gw.log), "import.log"), b.gw.bin,
		append(args, "--progress-interval", "10s", b.in.ndjson)...)
	if err != nil {
		return err
	}
	if err := b.firstSealRun(ctx); err != nil {
		return err
	}
	disk, _, err := b.gatewayDisk(ctx)
	if err != nil {
		return err
	}
	b.loads[0] = load{dur: d, disk: disk, rss: rss, notes: "`gateway import` (NDJSON, rollups included)"}
	logf("gateway import: %.1f s, %.0f points/s, %.2f B/point, peak RSS %s", d.Seconds(), float64(b.d.total())/d.Seconds(),
		float64(disk)/float64(b.d.total()), mib(rss))
	return b.gw.start(ctx, 2*time.Minute)
}

// loadVictoria posts the JSON lines to /api/v1/import, as curl would, and
// flushes them to searchable parts.
func (b *bench) loadVictoria(ctx context.Context) error {
	if err := b.vm.start(ctx, time.Minute); err != nil {
		return err
	}
	f, err := os.Open(b.in.vmJSON)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.vm.url+"/api/v1/import", f)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("VictoriaMetrics import: %s", resp.Status)
	}
	if _, _, err := fetch(b.client, b.vm.url+"/internal/force_flush"); err != nil {
		return err
	}
	d := time.Since(t0)
	rss := peakRSS(b.vm.pid())
	// Stopped and started again: everything it buffered is on disk, and
	// the size counts it.
	if err := b.vm.restart(ctx); err != nil {
		return err
	}
	disk, err := diskBytes(filepath.Join(b.vm.dir, "data"))
	if err != nil {
		return err
	}
	b.loads[1] = load{dur: d, disk: disk, rss: rss, notes: "`POST /api/v1/import` (JSON lines, one request), then `/internal/force_flush`"}
	logf("VictoriaMetrics import: %.1f s, %.0f points/s, %.2f B/point, peak RSS %s", d.Seconds(), float64(b.d.total())/d.Seconds(),
		float64(disk)/float64(b.d.total()), mib(rss))
	return nil
}

// loadPrometheus turns the OpenMetrics file into TSDB blocks with promtool
// (blocks of up to 31 days, the largest Prometheus compacts to) and starts
// Prometheus on them.
func (b *bench) loadPrometheus(ctx context.Context) error {
	data := b.prom.args[1][len("--storage.tsdb.path="):]
	d, rss, err := runTool(ctx, filepath.Join(filepath.Dir(b.prom.log), "promtool.log"), b.c.promtoolBin,
		"tsdb", "create-blocks-from", "openmetrics", "--quiet", "--max-block-duration=744h", b.in.openMetrics, data)
	if err != nil {
		return err
	}
	disk, err := diskBytes(data)
	if err != nil {
		return err
	}
	b.loads[2] = load{dur: d, disk: disk, rss: rss, notes: "`promtool tsdb create-blocks-from openmetrics --max-block-duration=744h`"}
	logf("promtool: %.1f s, %.0f points/s, %.2f B/point, peak RSS %s", d.Seconds(), float64(b.d.total())/d.Seconds(),
		float64(disk)/float64(b.d.total()), mib(rss))
	return b.prom.start(ctx, 2*time.Minute)
}

// window is the range of a panel read at the end of the data set.
func (b *bench) window(p panel) (int64, int64) {
	to := b.d.end.UnixMilli()
	return to - p.rng.Milliseconds(), to
}

// ask asks one side for panel p over [from, to) and decodes the answer.
func (b *bench) ask(s side, p panel, from, to int64, agg string, nocache bool) (answer, time.Duration, error) {
	body, d, err := fetch(b.client, b.ep.request(s, p, from, to, agg, nocache))
	if err != nil {
		return nil, d, fmt.Errorf("%s: %w", sideNames[s], err)
	}
	var a answer
	if s == gwNative {
		a, err = decodeGateway(body, p)
	} else {
		a, err = decodePromQL(body, p)
	}
	if err != nil {
		return nil, d, fmt.Errorf("%s: %w", sideNames[s], err)
	}
	return a, d, nil
}

// agree asks every side for the panel and checks the answers against
// Prometheus': the same series and windows, the same values. It returns
// Prometheus' answer and how each other side differs (nil: it agrees).
func (b *bench) agree(p panel, from, to int64, agg string, nocache bool) (answer, [nSides]error, error) {
	var diffs [nSides]error
	want, _, err := b.ask(prometheus, p, from, to, agg, nocache)
	if err != nil {
		return nil, diffs, err
	}
	for _, s := range []side{victoria, gwNative, gwPromQL} {
		a, _, err := b.ask(s, p, from, to, agg, nocache)
		if err != nil {
			return nil, diffs, err
		}
		if err := compare(a, want, agg); err != nil {
			diffs[s] = fmt.Errorf("%s, %s %s: %s differs from Prometheus: %w", p.label(), agg, rangeText(from, to), sideNames[s], err)
		}
	}
	return want, diffs, nil
}

// timed tells whether side s is timed on panel p: its answers agreed.
func (b *bench) timed(s side, p panel) bool {
	d := b.differs[p.label()]
	return d == nil || !d[s]
}

func rangeText(from, to int64) string {
	return fmt.Sprintf("[%s, %s)", time.UnixMilli(from).UTC().Format(time.RFC3339), time.UnixMilli(to).UTC().Format(time.RFC3339))
}

// check compares every panel's avg, min and max on every side before
// anything is timed. A side whose answer differs is not timed on that
// panel, and the run fails once the report is printed.
func (b *bench) check(context.Context) error {
	b.differs = map[string]*[nSides]bool{}
	for _, p := range b.panels {
		from, to := b.window(p)
		aggs := []string{"avg", "min", "max"}
		if p.raw {
			aggs = aggs[:1]
		}
		d := &[nSides]bool{}
		b.differs[p.label()] = d
		for _, agg := range aggs {
			a, diffs, err := b.agree(p, from, to, agg, true)
			if err != nil {
				return err
			}
			want := int(p.rng / p.step())
			if p.all {
				want *= b.d.series
			}
			if a.windows() != want {
				return fmt.Errorf("%s: Prometheus answers %d windows, the data set has %d", p.label(), a.windows(), want)
			}
			for s, err := range diffs {
				if err != nil && !d[s] {
					d[s] = true
					b.failed = true
					b.notes = append(b.notes, err.Error())
					logf("   %v", err)
				}
			}
		}
		var agreed []string
		for s := range nSides {
			if !d[s] {
				agreed = append(agreed, sideNames[s])
			}
		}
		logf("   %s: %d windows of %s: avg, min and max agree on %s", p.label(), int(p.rng/p.step()), p.step(), strings.Join(agreed, ", "))
	}
	return nil
}

// warm times every panel reps times per side, the sides interleaved (the
// one that goes first rotates), after one untimed read each.
func (b *bench) warm(ctx context.Context) error {
	for _, p := range b.panels {
		from, to := b.window(p)
		var ds [nSides][]time.Duration
		for r := -1; r < b.c.reps; r++ {
			for j := range nSides {
				s := (side(r+1) + j) % nSides
				if !b.timed(s, p) {
					continue
				}
				_, d, err := fetch(b.client, b.ep.request(s, p, from, to, "avg", true))
				if err != nil {
					return err
				}
				if r >= 0 {
					ds[s] = append(ds[s], d)
				}
			}
		}
		r := row{panel: p, mode: "warm", n: b.c.reps}
		for s := range nSides {
			r.med[s] = median(ds[s])
		}
		b.rows = append(b.rows, r)
		logf("   %s warm: %s", p.label(), r.text())
	}
	for i, s := range []*server{b.gw, b.vm, b.prom} {
		b.serving[i] = peakRSS(s.pid())
	}
	// On disk once the data has been served a while: each store has
	// finished what it does after a load (the gateway's import leaves
	// write-ahead logs and tables its first open tidies away).
	n, wal, err := b.gatewayDisk(ctx)
	if err != nil {
		return err
	}
	b.loads[0].disk, b.loads[0].wal = n, wal
	for i, dir := range []string{filepath.Join(b.vm.dir, "data"), b.prom.args[1][len("--storage.tsdb.path="):]} {
		n, wal, err := diskUse(dir)
		if err != nil {
			return err
		}
		b.loads[i+1].disk, b.loads[i+1].wal = n, wal
	}
	return nil
}

// coldPanels times each panel's first read after a restart of every
// server (the operating system's page cache stays warm). The gateway is
// restarted once more before its PromQL API is asked.
func (b *bench) coldPanels(ctx context.Context) error {
	if !b.c.cold {
		return nil
	}
	for i, p := range b.panels {
		from, to := b.window(p)
		for _, s := range []*server{b.gw, b.vm, b.prom} {
			if err := s.restart(ctx); err != nil {
				return err
			}
		}
		r := row{panel: p, mode: "cold", n: 1}
		order := []side{gwNative, victoria, prometheus}
		for j := range order {
			s := order[(i+j)%len(order)]
			if !b.timed(s, p) {
				continue
			}
			_, d, err := b.ask(s, p, from, to, "avg", true)
			if err != nil {
				return err
			}
			r.med[s] = d
		}
		if b.timed(gwPromQL, p) {
			if err := b.gw.restart(ctx); err != nil {
				return err
			}
			_, d, err := b.ask(gwPromQL, p, from, to, "avg", true)
			if err != nil {
				return err
			}
			r.med[gwPromQL] = d
		}
		b.rows = append(b.rows, r)
		logf("   %s cold: %s", p.label(), r.text())
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func (r row) text() string {
	var parts []string
	for s := range nSides {
		if r.med[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", sideNames[s], msText(r.med[s])))
		}
	}
	return strings.Join(parts, ", ")
}

func msText(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

var errMismatch = errors.New("answers differ")

// loopbackHosts reports whether every host:port of hosts is on loopback:
// the benchmark sends its load nowhere else.
func loopbackHosts(hosts string) bool {
	for _, h := range strings.Split(hosts, ",") {
		host, _, err := net.SplitHostPort(strings.TrimSpace(h))
		if err != nil {
			host = strings.TrimSpace(h)
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}
