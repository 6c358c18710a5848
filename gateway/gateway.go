// Package gateway assembles the gateway: it opens the store, checks that
// the configured pyramid is the one the store was written with, and builds
// the caches, the query engine (with its decorators), the rollup worker,
// the write path and the HTTP handler with every front end mounted.
// `gateway serve`, the dashboard preview, the test suites and the
// benchmarks all build the gateway here, so there is one wiring to read.
//
// Construction follows the dependencies, with no callback assigned later:
// store → series cache → rollup worker (reads the store) → partition cache
// (whose finality needs the worker's watermarks) → engine → writer.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/cursor"
	"github.com/tsgate/tsgate/grafana"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/index"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/kafkaingest"
	"github.com/tsgate/tsgate/layouts"
	"github.com/tsgate/tsgate/promapi"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/seal"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// Options are the parts of the gateway that are not configuration: the
// clock, the logger, the metrics registry, and the hooks tests use.
type Options struct {
	// Now is the clock that decides what data is current; time.Now when
	// nil.
	Now    func() time.Time
	Logger *slog.Logger
	// Instruments are the registry and the HTTP metrics, made before the
	// gateway when its server starts first (NewInstruments); new ones
	// when nil.
	Instruments *Instruments
	// WrapReader decorates the partition reader that reads answers (tests
	// slow it down or make it fail); nil leaves it as it is.
	WrapReader func(tiers.PartitionReader) tiers.PartitionReader
	// Home serves GET /; the dashboard when nil.
	Home http.Handler
	// Tokens turn authentication on (Config.Auth says where they come
	// from); nil leaves every route open.
	Tokens *auth.Tokens
	// Version is the gateway's version, for tsgate_build_info.
	Version string
}

// Gateway is an assembled gateway.
type Gateway struct {
	Config Config
	Store  tiers.Store
	Series *cache.Series
	// Results is the results cache; nil when disabled.
	Results *cache.Windows
	Engine  query.Engine
	// Many reads many series through Engine.
	Many *query.Many
	// Index answers selectors from the label index.
	Index   *index.Index
	Writer  *ingest.Writer
	Rollups *rollup.Worker
	// Sealer rewrites final raw buckets and complete rollup partitions as
	// compressed chunks; nil when
	// the store does not seal.
	Sealer *seal.Worker
	// Importer writes history (POST /v1/import, gateway import).
	Importer *ingest.Importer
	// NewSeries bounds the series that every way in together creates.
	NewSeries *ingest.NewSeriesLimit
	// Kafka consumes points from a Kafka topic once run; nil when no
	// brokers are configured.
	Kafka *kafkaingest.Consumer
	// Layouts is layout administration, the wide-partition tracker and
	// the blocked list.
	Layouts *layouts.Service
	Metrics *httpapi.Metrics
	// PromMetrics are the Prometheus API's.
	PromMetrics *promapi.Metrics
	// Registry holds every metric of the gateway.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	Now      func() time.Time

	opts      Options
	ownsStore bool
}

// Open opens the configured store and assembles the gateway over it; Close
// closes the store.
func Open(ctx context.Context, cfg Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	store, err := OpenStore(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", cfg.Store, err)
	}
	g, err := New(ctx, store, cfg, opts)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	g.ownsStore = true
	return g, nil
}

// OpenStore opens the configured backend.
func OpenStore(ctx context.Context, cfg Config, opts Options) (tiers.Store, error) {
	switch cfg.Store {
	case "cassandra":
		cc := cfg.Cassandra
		cc.Now = opts.Now
		return cassandra.Open(ctx, cc, cfg.Pyramid, opts.Logger)
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, err
		}
		return embedded.Open(cfg.DataDir, embedded.Options{Logger: opts.Logger, Now: opts.Now, Compression: cfg.EmbeddedCompression,
			MemTableSize: uint64(cfg.EmbeddedMemTableBytes)})
	}
}

// New assembles the gateway over an open store, which the caller closes.
func New(ctx context.Context, store tiers.Store, cfg Config, opts Options) (*Gateway, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	inst := opts.Instruments
	if inst == nil {
		inst = NewInstruments(opts.Version)
	}
	reg := inst.Registry
	sm := newStoreMetrics(reg)
	if err := CheckPyramid(ctx, store, cfg.Pyramid); err != nil {
		return nil, err
	}
	signer, err := cursorSigner(ctx, store, cfg.CursorKey)
	if err != nil {
		return nil, err
	}
	now, log := opts.Now, opts.Logger
	g := &Gateway{Config: cfg, Store: store, Registry: reg, Logger: log, Now: now, opts: opts}

	g.Series = cache.NewSeries(store, cfg.SeriesCacheSize, cfg.SeriesTTL, cfg.LayoutTTL, now)
	// From here on the read and write paths count their raw partitions.
	store = g.newLayouts(store, cfg, reg)
	rc := cfg.Rollup
	rc.Lateness = cfg.Ingest.Lateness
	// The label answers that resolve selectors, and the late-index marks
	// raw reads key their buckets on, held for the series TTL: other
	// gateways' labels, late points and imports are seen within it, as
	// their points are; this gateway's drop them through writerStore.
	labels := cache.NewLabels(store, cfg.SeriesCacheSize, cfg.SeriesTTL, now)
	lateMarks := cache.NewLateMarks(store, cfg.SeriesCacheSize, cfg.SeriesTTL, now)
	// The worker marks corrected series through the series cache, so that
	// this gateway's reads key on the new generation at once.
	g.Rollups = rollup.New(writerStore{store, g.Series, labels, lateMarks}, cfg.Pyramid, cfg.Query.Scan, rc, now, log, rollup.NewMetrics(reg))
	// The sealer works on the store itself: sealing is neither a read nor
	// a write of the paths the wrappers count.
	if ss, ok := g.Store.(seal.Store); ok {
		sc := cfg.Seal
		sc.Lateness, sc.Grace = cfg.Ingest.Lateness, rc.Grace
		g.Sealer = seal.New(ss, *cfg.Pyramid.Raw(), sc, now, log, seal.NewMetrics(reg)).SealRollups(cfg.Pyramid, g.Rollups.Watermarks)
		// Windows of history recomputed (late points, an import's log) are
		// rows written to sealed partitions: the sealer folds them in.
		g.Rollups.OnRewrite(g.Sealer.Rewritten)
	}

	if sk, ok := g.Store.(interface{ RowReadsSkipped() int64 }); ok {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_store_sealed_reads_without_rows_total",
			Help: "Reads of sealed partitions that found no rows written since the seal, and read the chunks alone."},
			func() float64 { return float64(sk.RowReadsSkipped()) }))
	}

	var reader tiers.PartitionReader = timedReader{store, sm}
	var invalidate func(...string) // imports change buckets the cache takes as final
	if opts.WrapReader != nil {
		reader = opts.WrapReader(reader)
	}
	var buckets *cache.Buckets
	if cfg.CacheBytes > 0 {
		final := cache.Finality{Pyramid: cfg.Pyramid, Lateness: cfg.Ingest.Lateness, Grace: rc.Grace, Rollups: g.Rollups, Now: now}
		buckets = cache.NewBuckets(reader, final.Final, cfg.CacheBytes)
		buckets.SettleRaw(final.RawSettledBefore)
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_cache_hits_total", Help: "Buckets served from the cache of final buckets."},
				func() float64 { h, _ := buckets.Stats(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_cache_misses_total", Help: "Final buckets read from the store into the cache."},
				func() float64 { _, m := buckets.Stats(); return float64(m) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_cache_settled_hits_total", Help: "Raw buckets not final yet whose settled start was served from the cache of buckets."},
				func() float64 { return float64(buckets.SettledHits()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tsgate_cache_bytes", Help: "Memory held by the cache of final buckets."},
				func() float64 { return float64(buckets.Bytes()) }),
		)
		invalidate = buckets.Invalidate
	}
	var results *cache.Windows
	if cfg.ResultsCacheBytes > 0 {
		results = cache.NewWindows(cfg.ResultsCacheBytes)
		g.Results = results
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_results_cache_hits_total", Help: "Windowed reads that found complete windows in the results cache."},
				func() float64 { h, _, _ := results.Stats(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_results_cache_misses_total", Help: "Windowed reads that found nothing in the results cache."},
				func() float64 { _, m, _ := results.Stats(); return float64(m) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tsgate_results_cache_windows_served_total", Help: "Windows answered from the results cache instead of the store."},
				func() float64 { _, _, n := results.Stats(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tsgate_results_cache_bytes", Help: "Memory held by the results cache."},
				func() float64 { return float64(results.Bytes()) }),
		)
	}
	g.Metrics = inst.HTTP
	g.PromMetrics = promapi.NewMetrics(reg)
	engine := query.New(query.Deps{
		Store: newEngineStore(reader, lateMarks, g.Layouts.Guard(g.Series), buckets), Pyramid: cfg.Pyramid,
		Watermarks: g.Rollups, Signer: signer, Results: results, Now: now,
	}, cfg.Query)
	g.Engine = g.Metrics.CountRefusals(query.Observe(engine, g.Metrics.ObserveRead))
	many := query.DefaultManyConfig()
	many.MaxResponsePoints = cfg.HTTP.Limits.MaxResponsePoints
	g.Index = index.New(indexStore{LabelIndex: labels, series: g.Series, store: store})
	g.Many = query.NewMany(g.Engine, cfg.Query.Limits, many).WithSelectors(g.Index, signer, cfg.Pyramid, now, cfg.Query.MaxSeriesPerQuery)
	g.Writer = ingest.NewWriter(writerStore{timedWriter{store, sm}, g.Series, labels, lateMarks}, g.Series, cfg.Pyramid, cfg.Ingest, now)
	g.Writer.RefuseBlocked(g.Layouts.ForWrites())
	g.Writer.KnowSeries(g.Series)
	g.Importer = ingest.NewImporter(g.Writer, cfg.Pyramid, g.Rollups, cfg.Import, invalidate)
	g.NewSeries = cfg.HTTP.Limits.NewSeriesLimit()
	if cfg.Kafka.Enabled() {
		g.Kafka, err = kafkaingest.New(cfg.Kafka, kafkaingest.Deps{
			Writer: g.Writer, Registry: g.Series, NewSeries: g.NewSeries,
			Registerer: reg, Logger: log, Now: now,
		})
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

// engineStore is what the engine reads: partitions from the store, the
// late index from the store, series through the series cache, refusing
// blocked series before anything of theirs is read.
type engineStore struct {
	tiers.PartitionReader
	lateIndex
	layouts.Guard
}

// lateIndex is the store's late index, of one series at a time and of
// many at once.
type lateIndex interface {
	tiers.LateIndex
	tiers.LateIndexBatch
}

// cachedStore is an engineStore whose final buckets are served from
// memory (the scan looks for partial.Buckets).
type cachedStore struct {
	engineStore
	*cache.Buckets
}

func newEngineStore(r tiers.PartitionReader, late lateIndex, series layouts.Guard, buckets *cache.Buckets) query.Store {
	s := engineStore{r, late, series}
	if buckets == nil {
		return s
	}
	return cachedStore{s, buckets}
}

// writerStore writes through the series cache and the label answers and
// late marks held, so that local reads see new series, points, labels,
// late points and imports at once.
type writerStore struct {
	tiers.Store
	series    *cache.Series
	labels    *cache.Labels
	lateMarks *cache.LateMarks
}

func (w writerStore) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	return w.series.NoteSeries(ctx, spans)
}

func (w writerStore) MarkRewritten(ctx context.Context, ids []string) error {
	return w.series.MarkRewritten(ctx, ids)
}

// SetLabels labels a series and drops its cached entry and the label
// answers held, so that local reads see the labels at once.
func (w writerStore) SetLabels(ctx context.Context, id string, labels tiers.Labels) error {
	err := w.labels.SetLabels(ctx, id, labels)
	w.series.Invalidate(id)
	return err
}

// MarkLate marks late buckets and drops the marks held of their series.
func (w writerStore) MarkLate(ctx context.Context, marks []tiers.LateMark) error {
	return w.lateMarks.MarkLate(ctx, marks)
}

// indexStore is what the index reads: the store's label index and
// listing, series looked up through the cache.
type indexStore struct {
	tiers.LabelIndex
	series *cache.Series
	store  tiers.Store
}

func (s indexStore) LookupSeriesOf(ctx context.Context, ids []string) (map[string]tiers.SeriesInfo, error) {
	return s.series.LookupSeriesOf(ctx, ids)
}

func (s indexStore) ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	return s.store.ListSeries(ctx, prefix, after, limit)
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

// Handler returns the HTTP API with every front end mounted.
func (g *Gateway) Handler() http.Handler {
	registry := registryView{g.Series, g.Store}
	gf := grafana.New(grafana.Deps{
		Engine: g.Engine, Many: g.Many, Series: registry, Labels: g.Index, MaxLimit: g.Config.Query.MaxLimit,
		MaxSeries: g.Config.HTTP.MaxQueries, Logger: g.Logger, Now: g.Now,
		CORSOrigins: g.Config.HTTP.Limits.CORSOrigins,
	})
	prom := promapi.New(promapi.Deps{
		Many: g.Many, Index: g.Index, Registry: registry, Writer: g.Writer, NewSeries: g.NewSeries,
		MaxLimit: g.Config.Query.MaxLimit, Timeout: g.Config.Query.MaxSLO, Pyramid: g.Config.Pyramid,
		Now: g.Now, Logger: g.Logger, Metrics: g.PromMetrics,
	}, g.Config.Prometheus)
	srv := httpapi.New(httpapi.Deps{
		Engine: g.Engine, Many: g.Many, Index: g.Index, Limits: g.Config.Query.Limits, Pyramid: g.Config.Pyramid,
		Writer: g.Writer, Importer: g.Importer, Registry: registry, Rollups: g.Rollups,
		Ready: g.Store.Ping, Logger: g.Logger, Now: g.Now,
		Metrics: g.Metrics, Gatherer: g.Registry, Home: g.opts.Home, Layouts: g.Layouts,
		Mounts: g.mounts(
			httpapi.Mount{Prefix: "/grafana", Handler: gf.Handler(), Role: auth.Read, Refuse: grafana.WriteRefusal, CORS: true},
			httpapi.Mount{Prefix: "/prometheus", Handler: prom.Handler(), Role: auth.Read,
				Bodies: []string{"application/x-www-form-urlencoded", "application/x-protobuf"}, Refuse: promapi.WriteRefusal},
			// Remote write writes: it needs the write role.
			httpapi.Mount{Prefix: "/prometheus/api/v1/write", Handler: prom.RemoteWriteHandler(), Role: auth.Write,
				Bodies: []string{"application/x-protobuf"}},
		),
		Tokens: g.opts.Tokens, AuthMetrics: g.Config.Auth.Metrics,
		NewSeries: g.NewSeries,
	}, g.Config.HTTP)
	return srv.Handler()
}

// Starting returns the handler a server answers with until the gateway is
// assembled over a store that ping asks (httpapi.Server.Starting): the
// routes that need no store, served with the configuration and options
// New will get, opts.Instruments included.
func Starting(cfg Config, opts Options, ping func(context.Context) error) http.Handler {
	if opts.Instruments == nil {
		opts.Instruments = NewInstruments(opts.Version)
	}
	return httpapi.New(httpapi.Deps{
		Limits: cfg.Query.Limits, Pyramid: cfg.Pyramid, Ready: ping, Logger: opts.Logger, Now: opts.Now,
		Metrics: opts.Instruments.HTTP, Gatherer: opts.Instruments.Registry, Home: opts.Home,
		Tokens: opts.Tokens, AuthMetrics: cfg.Auth.Metrics,
	}, cfg.HTTP).Starting()
}

// mounts adds the operators' routes to the front ends m: the profiles
// need admin.
func (g *Gateway) mounts(m ...httpapi.Mount) []httpapi.Mount {
	if g.Config.Pprof {
		m = append(m, httpapi.Mount{Prefix: "/debug/pprof", Handler: pprofHandler(), Role: auth.Admin})
	}
	return m
}

// Close closes the store if Open opened it.
func (g *Gateway) Close() error {
	if !g.ownsStore {
		return nil
	}
	return g.Store.Close()
}

// cursorSigner returns the signer of cursors: the configured key, or the
// deployment's key kept in the store (created on first start), so that
// every instance accepts every other's cursors.
func cursorSigner(ctx context.Context, store tiers.Store, configured string) (*cursor.Signer, error) {
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
	s, err := cursor.NewSigner(key)
	if err != nil {
		return nil, errors.New("--cursor-key: " + err.Error())
	}
	return s, nil
}
