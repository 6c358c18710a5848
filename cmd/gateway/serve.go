package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/demo"
	"github.com/tsgate/tsgate/flagconf"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/partial"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
	"github.com/tsgate/tsgate/tiers/embedded"
)

var errUsage = errors.New("usage")

// serveConfig is everything `gateway serve` can be told.
type serveConfig struct {
	configFile string
	addr       string
	store      string
	dataDir    string
	demo       bool
	logLevel   string
	logFormat  string
	cursorKey  string

	cacheBytes      int64
	seriesCacheSize int
	seriesTTL       time.Duration
	layoutTTL       time.Duration
	shutdownTimeout time.Duration

	pyramid   tiers.Pyramid
	router    router.Config
	query     query.Config
	ingest    ingest.Config
	rollup    rollup.Config
	http      httpapi.Config
	cassandra cassandra.Config
}

func defaultServeConfig() serveConfig {
	return serveConfig{
		addr: "127.0.0.1:8080", store: "embedded", dataDir: "data", logLevel: "info", logFormat: "text",
		cacheBytes: 256 << 20, seriesCacheSize: 100000, seriesTTL: 2 * time.Second, layoutTTL: time.Minute,
		shutdownTimeout: 30 * time.Second,
		pyramid:         tiers.DefaultPyramid(), router: router.DefaultConfig(), query: query.DefaultConfig(),
		ingest: ingest.DefaultConfig(), rollup: rollup.DefaultConfig(), http: httpapi.DefaultConfig(),
		cassandra: cassandra.DefaultConfig(),
	}
}

// registerStoreFlags adds the flags `serve` and `schema` share.
func (c *serveConfig) registerStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.configFile, "config", "", "YAML file with flag values (keys are flag names)")
	fs.StringVar(&c.store, "store", c.store, "storage backend: embedded or cassandra")
	fs.StringVar(&c.dataDir, "data-dir", c.dataDir, "directory of the embedded store")
	registerPyramid(fs, &c.pyramid)
	c.cassandra.RegisterFlags(fs)
}

func (c *serveConfig) registerFlags(fs *flag.FlagSet) {
	c.registerStoreFlags(fs)
	fs.StringVar(&c.addr, "addr", c.addr, "address to listen on")
	fs.BoolVar(&c.demo, "demo", c.demo, "load generated demo series when the store is empty")
	fs.StringVar(&c.logLevel, "log-level", c.logLevel, "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", c.logFormat, "text or json")
	fs.StringVar(&c.cursorKey, "cursor-key", c.cursorKey, "base64 key that signs cursors (default: generated once and kept in the store)")
	fs.Int64Var(&c.cacheBytes, "cache-bytes", c.cacheBytes, "memory for cached rows of final buckets (0 disables)")
	fs.IntVar(&c.seriesCacheSize, "series-cache-size", c.seriesCacheSize, "series whose metadata is cached")
	durVar(fs, &c.seriesTTL, "series-cache-ttl", "how long a series' first/last point is cached (bounds how soon other instances' new series and points are seen)")
	durVar(fs, &c.layoutTTL, "layout-cache-ttl", "how long a series' partition layout is cached")
	durVar(fs, &c.shutdownTimeout, "shutdown-timeout", "how long in-flight requests may take to finish on shutdown")
	msVar(fs, &c.router.RawMax, "auto-raw-max", "resolution=auto answers ranges up to this with raw points")
	msVar(fs, &c.router.MinuteMax, "auto-minute-max", "... up to this from the minute tier")
	msVar(fs, &c.router.HourMax, "auto-hour-max", "... up to this from the hour tier, longer ones from the day tier")
	fs.IntVar(&c.query.Parallelism, "read-parallelism", c.query.Parallelism, "partitions one request reads at once")
	fs.IntVar(&c.query.PageSize, "read-page-size", c.query.PageSize, "rows fetched per store round trip")
	durVar(fs, &c.query.DefaultSLO, "slo-default", "latency budget of a read that names none")
	durVar(fs, &c.query.MaxSLO, "slo-max", "the largest latency budget a read may ask for")
	fs.IntVar(&c.query.DefaultLimit, "limit-default", c.query.DefaultLimit, "points per page when a read names no limit")
	fs.IntVar(&c.query.MaxLimit, "limit-max", c.query.MaxLimit, "the largest page a read may ask for")
	durVar(fs, &c.ingest.Lateness, "lateness", "points older than this on arrival go to the late table; rollups wait this long")
	durVar(fs, &c.ingest.ClockSkew, "clock-skew", "how far in the future a point may be")
	durVar(fs, &c.rollup.Interval, "rollup-interval", "how often the rollup worker runs (0: only on demand)")
	fs.IntVar(&c.rollup.Parallelism, "rollup-parallelism", c.rollup.Parallelism, "series recomputed at once")
	fs.Int64Var(&c.http.MaxBodyBytes, "max-body-bytes", c.http.MaxBodyBytes, "largest write body accepted (larger: 413)")
}

func (c *serveConfig) validate() error {
	errs := []error{c.pyramid.Validate(), c.router.Validate(), c.query.Validate(), c.ingest.Validate(), c.rollup.Validate(), c.http.Validate()}
	switch c.store {
	case "embedded":
		if c.dataDir == "" {
			errs = append(errs, errors.New("--data-dir must be set for the embedded store"))
		}
	case "cassandra":
		errs = append(errs, c.cassandra.Validate())
	default:
		errs = append(errs, fmt.Errorf("--store must be embedded or cassandra, not %q", c.store))
	}
	if c.cacheBytes < 0 || c.seriesCacheSize < 1 {
		errs = append(errs, errors.New("cache sizes must not be negative"))
	}
	return errors.Join(errs...)
}

func (m Main) parseFlags(name string, args []string, register func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	register(fs)
	if err := flagconf.Parse(fs, args, "GATEWAY_", "config", m.LookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

func newLogger(w *os.File, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json")
}

// openStore opens the configured backend.
func openStore(ctx context.Context, c *serveConfig, log *slog.Logger) (tiers.Store, error) {
	switch c.store {
	case "cassandra":
		return cassandra.Open(ctx, c.cassandra, c.pyramid, log)
	default:
		if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
			return nil, err
		}
		return embedded.Open(c.dataDir, embedded.Options{Logger: log})
	}
}

func (m Main) serve(ctx context.Context, args []string) error {
	c := defaultServeConfig()
	if err := m.parseFlags("serve", args, c.registerFlags); err != nil {
		return err
	}
	c.rollup.Lateness = c.ingest.Lateness
	if err := c.validate(); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, &c, log)
	if err != nil {
		return fmt.Errorf("open %s store: %w", c.store, err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()
	ln, err := awaitStore(ctx, c.addr, store.Ping, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := checkLayout(ctx, store, &c.pyramid); err != nil {
		return err
	}
	signer, err := cursorSigner(ctx, store, c.cursorKey)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	now := time.Now
	series := cache.NewSeries(store, c.seriesCacheSize, c.seriesTTL, c.layoutTTL, now)

	// The engine reads through the partition cache; the rollup worker, which
	// the cache's predicate depends on, is created right after.
	var worker *rollup.Worker
	watermarks := func(ctx context.Context) router.Watermarks { return worker.Watermarks(ctx) }
	var reader tiers.PartitionReader = store
	if c.cacheBytes > 0 {
		pc := cache.NewPartitions(store, finalRead(&c.pyramid, c.ingest.Lateness, c.rollup.Grace, watermarks, now), c.cacheBytes)
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_cache_hits_total", Help: "Partition reads served from the cache of final buckets."},
				func() float64 { h, _ := pc.Stats(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_cache_misses_total", Help: "Cacheable partition reads that went to the store."},
				func() float64 { _, m := pc.Stats(); return float64(m) }),
		)
		reader = pc
	}
	engineStore := struct {
		tiers.PartitionReader
		tiers.LateIndex
		*cache.Series
	}{reader, store, series}
	engine := query.New(engineStore, c.pyramid, c.router, watermarks, signer, c.query, now)
	worker = rollup.New(store, engine, c.rollup, now, log, rollup.NewMetrics(reg))
	writer := ingest.NewWriter(writerStore{store, series}, series, &c.pyramid, c.ingest, now)

	if c.demo {
		if err := loadDemo(ctx, m, store, writer, worker, log); err != nil {
			return err
		}
	}

	srv := httpapi.New(httpapi.Deps{
		Engine: engine, Writer: writer, Registry: registryView{series, store}, Rollups: worker,
		Ready: store.Ping, Logger: log, Now: now, Metrics: httpapi.NewMetrics(reg), Gatherer: reg,
	}, c.http)
	return m.listenAndServe(ctx, c, ln, srv.Handler(), worker, log)
}

func (m Main) listenAndServe(ctx context.Context, c serveConfig, ln net.Listener, h http.Handler, worker *rollup.Worker, log *slog.Logger) error {
	server := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		worker.Run(workerCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	log.Info("gateway listening", "url", url, "store", c.store, "version", version)
	fmt.Fprintf(m.Stdout, "gateway %s serving on %s (store: %s)\n", version, url, c.store)
	fmt.Fprintf(m.Stdout, "try: curl '%s/v1/series'\n", url)
	if c.demo {
		fmt.Fprintf(m.Stdout, "     curl '%s/v1/series/demo.temperature.office/points?from=now-2h&resolution=raw&limit=5'\n", url)
		fmt.Fprintf(m.Stdout, "     curl '%s/v1/series/demo.power.meter1/points?from=now-2d&max_points=24&agg=min,max,avg'\n", url)
	}
	if m.Ready != nil {
		m.Ready(ln.Addr().String())
	}
	var result error
	select {
	case err := <-serveErr:
		result = err
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests", "timeout", c.shutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		defer cancel()
		if err := server.Shutdown(sctx); err != nil {
			result = fmt.Errorf("shutdown: %w", err)
		}
	}
	stopWorker()
	<-workerDone
	return result
}

// loadDemo fills an empty store with the demo series and rolls them up.
func loadDemo(ctx context.Context, m Main, store tiers.Store, w *ingest.Writer, worker *rollup.Worker, log *slog.Logger) error {
	existing, err := store.ListSeries(ctx, "", "", 1)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if len(existing) > 0 {
		fmt.Fprintln(m.Stdout, "demo: the store already holds series; not loading demo data")
		return nil
	}
	start := time.Now()
	last := time.Time{}
	err = demo.Load(ctx, w, time.Now().UnixMilli(), func(done, total int64) {
		if time.Since(last) > 500*time.Millisecond || done == total {
			last = time.Now()
			fmt.Fprintf(m.Stdout, "\rdemo: loading points %3d%% (%d/%d)", done*100/total, done, total)
		}
	})
	fmt.Fprintln(m.Stdout)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "demo: rolling up minute, hour and day tiers")
	if _, err := worker.RunOnce(ctx, true); err != nil {
		return fmt.Errorf("demo rollups: %w", err)
	}
	log.Info("demo data loaded", "series", len(demo.All()), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// cursorSigner returns the signer of cursors: the configured key, or the
// deployment's key kept in the store (created on first start), so that
// every instance accepts every other's cursors.
func cursorSigner(ctx context.Context, store tiers.Store, configured string) (*partial.Signer, error) {
	var key []byte
	if configured != "" {
		k, err := base64.StdEncoding.DecodeString(configured)
		if err != nil {
			return nil, fmt.Errorf("--cursor-key must be base64: %w", err)
		}
		key = k
	} else {
		k, err := store.Secret(ctx, "cursor-key", func() ([]byte, error) {
			b := make([]byte, 32)
			_, err := rand.Read(b)
			return b, err
		})
		if err != nil {
			return nil, fmt.Errorf("cursor key: %w", err)
		}
		key = k
	}
	s, err := partial.NewSigner(key)
	if err != nil {
		return nil, fmt.Errorf("--cursor-key: %w", err)
	}
	return s, nil
}

// checkLayout refuses to start with bucket widths or event-bucket counts
// other than those the store's data was written with: every existing point
// would silently become unreadable.
func checkLayout(ctx context.Context, store tiers.Store, p *tiers.Pyramid) error {
	type tierLayout struct {
		Tier         string `json:"tier"`
		Bucket       string `json:"bucket"`
		EventBuckets int    `json:"event_buckets"`
	}
	var want []tierLayout
	for _, l := range p.Levels() {
		t := p.Tier(l)
		want = append(want, tierLayout{t.Name(), tiers.FormatDuration(t.BucketWidth), t.EventBuckets})
	}
	enc, _ := json.Marshal(want)
	got, err := store.Secret(ctx, "layout", func() ([]byte, error) { return enc, nil })
	if err != nil {
		return fmt.Errorf("read the stored layout: %w", err)
	}
	if string(got) == string(enc) {
		return nil
	}
	var stored []tierLayout
	_ = json.Unmarshal(got, &stored)
	var diffs []string
	for i := range min(len(stored), len(want)) {
		if stored[i] != want[i] {
			diffs = append(diffs, fmt.Sprintf("%s: stored bucket %s × %d, configured %s × %d",
				want[i].Tier, stored[i].Bucket, stored[i].EventBuckets, want[i].Bucket, want[i].EventBuckets))
		}
	}
	return fmt.Errorf("the configured partition layout differs from the one this store was written with (%s); "+
		"existing data would become unreadable — restore the --*-bucket and --raw-event-buckets values", strings.Join(diffs, "; "))
}

// finalRead says when a partition read's rows can no longer change and may
// be cached: raw rows once no on-time point can land in the span, rollup
// rows once no late point can still correct their windows and the worker
// has rolled them up.
func finalRead(p *tiers.Pyramid, lateness, grace time.Duration, wm func(context.Context) router.Watermarks, now func() time.Time) func(tiers.ReadRequest) bool {
	rawRetention := p.Tier(tiers.LevelRaw).Retention
	return func(req tiers.ReadRequest) bool {
		n := now().UnixMilli() - grace.Milliseconds()
		switch req.Key.Table {
		case tiers.TableRaw:
			return req.Span.To+lateness.Milliseconds() <= n
		case tiers.TableLate:
			return false
		}
		for _, l := range p.Levels()[1:] {
			t := p.Tier(l)
			if t.Table == req.Key.Table {
				return req.Span.To+t.Step+rawRetention <= n && req.Span.To <= wm(context.Background())[l]
			}
		}
		return false
	}
}

// writerStore writes through the series cache, so that local reads see new
// series and points at once.
type writerStore struct {
	tiers.Store
	series *cache.Series
}

func (w writerStore) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	return w.series.NoteSeries(ctx, spans)
}

// registryView looks series up through the cache and lists them from the
// store.
type registryView struct {
	*cache.Series
	store tiers.Store
}

func (r registryView) ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	return r.store.ListSeries(ctx, prefix, after, limit)
}
