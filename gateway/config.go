package gateway

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/tsgate/tsgate/auth"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/kafkaingest"
	"github.com/tsgate/tsgate/layouts"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/promapi"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/rollup"
	"github.com/tsgate/tsgate/seal"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
	"github.com/tsgate/tsgate/tiers/embedded"
)

// Config is everything the gateway can be told, each part with its flags.
type Config struct {
	// Store is embedded or cassandra.
	Store   string
	DataDir string
	// EmbeddedCompression is how the embedded store compresses its
	// tables: snappy, or zstd (smaller, more CPU).
	EmbeddedCompression string
	// EmbeddedMemTableBytes is the size of one of the embedded store's
	// memtables, and of the write-ahead log space Pebble reserves for it.
	EmbeddedMemTableBytes int64
	CursorKey             string

	CacheBytes int64
	// ResultsCacheBytes bounds the results cache (complete windows of
	// answers); 0 disables it.
	ResultsCacheBytes int64
	SeriesCacheSize   int
	SeriesTTL         time.Duration
	LayoutTTL         time.Duration

	// Pprof serves Go's runtime profiles under /debug/pprof/.
	Pprof bool

	// Pyramid is the tiers; Finish builds it from the flags.
	Pyramid tiers.Pyramid
	Query   query.Config
	Ingest  ingest.Config
	Import  ingest.ImportConfig
	Rollup  rollup.Config
	// Seal is the worker that stores final raw buckets as compressed
	// chunks; its lateness and grace are the write path's and the rollup
	// worker's.
	Seal       seal.Config
	HTTP       httpapi.Config
	Prometheus promapi.Config
	Cassandra  cassandra.Config
	Auth       auth.Config
	Layouts    layouts.Config
	// Kafka is the consumer of points from a Kafka topic; none runs
	// without brokers.
	Kafka kafkaingest.Config

	tierFlags *pyramidFlags
}

// DefaultConfig returns the defaults of every part.
func DefaultConfig() Config {
	return Config{
		Store: "embedded", DataDir: "data", EmbeddedCompression: "snappy", EmbeddedMemTableBytes: 16 << 20,
		CacheBytes: 256 << 20, ResultsCacheBytes: 128 << 20, SeriesCacheSize: 100000, SeriesTTL: 2 * time.Second, LayoutTTL: time.Minute,
		Pyramid: tiers.DefaultPyramid(), Query: query.DefaultConfig(),
		Ingest: ingest.DefaultConfig(), Import: ingest.DefaultImportConfig(), Rollup: rollup.DefaultConfig(), Seal: seal.DefaultConfig(), HTTP: httpapi.DefaultConfig(),
		Prometheus: promapi.DefaultConfig(), Cassandra: cassandra.DefaultConfig(), Layouts: layouts.DefaultConfig(),
		Kafka: kafkaingest.DefaultConfig(),
	}
}

// RegisterStoreFlags adds the flags that say where the data is and how it
// is laid out: what `gateway schema` needs too.
func (c *Config) RegisterStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Store, "store", c.Store, "storage backend: embedded or cassandra")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the embedded store")
	fs.StringVar(&c.EmbeddedCompression, "embedded-compression", c.EmbeddedCompression, "compression of the embedded store's tables: snappy, or zstd (15-30 % smaller rollup rows on disk, more CPU in compactions and cold reads); tables already written keep theirs until compacted")
	fs.Int64Var(&c.EmbeddedMemTableBytes, "embedded-memtable-bytes", c.EmbeddedMemTableBytes,
		"size of one of the embedded store's memtables, which absorb writes between flushes; Pebble reserves 110 % of it on disk for the write-ahead log (at least 1 MiB)")
	c.tierFlags = registerPyramid(fs)
	c.Cassandra.RegisterFlags(fs)
}

// RegisterFlags adds every flag of `gateway serve` but those of the
// process itself (address, logging).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.RegisterStoreFlags(fs)
	fs.StringVar(&c.CursorKey, "cursor-key", c.CursorKey, "base64 key that signs cursors (default: generated once and kept in the store)")
	fs.Int64Var(&c.CacheBytes, "cache-bytes", c.CacheBytes, "memory for cached rows of final buckets (0 disables)")
	fs.Int64Var(&c.ResultsCacheBytes, "results-cache-bytes", c.ResultsCacheBytes, "memory for complete windows of answers, which repeated and sliding panels read instead of the store (0 disables)")
	fs.BoolVar(&c.Pprof, "pprof", c.Pprof, "serve Go's runtime profiles (CPU, heap, goroutines) under /debug/pprof/ for operators")
	fs.IntVar(&c.SeriesCacheSize, "series-cache-size", c.SeriesCacheSize, "series whose metadata is cached")
	DurationVar(fs, &c.SeriesTTL, "series-cache-ttl", "how long a series' first/last point, generation, labels and late-index marks, and the series a selector names, are cached (bounds how soon other instances' new series, labels, points, late points and imports are seen)")
	DurationVar(fs, &c.LayoutTTL, "layout-cache-ttl", "how long a series' partition layout is cached")
	fs.IntVar(&c.Query.Scan.Parallelism, "read-parallelism", c.Query.Scan.Parallelism, "partitions one request reads at once")
	fs.IntVar(&c.Query.Scan.PageSize, "read-page-size", c.Query.Scan.PageSize, "rows fetched per store round trip")
	DurationVar(fs, &c.Query.DefaultSLO, "slo-default", "latency budget of a read that names none")
	DurationVar(fs, &c.Query.MaxSLO, "slo-max", "the largest latency budget a read may ask for")
	fs.IntVar(&c.Query.DefaultLimit, "limit-default", c.Query.DefaultLimit, "points per page when a read names no limit")
	fs.IntVar(&c.Query.MaxLimit, "limit-max", c.Query.MaxLimit, "the largest page a read may ask for")
	fs.IntVar(&c.Query.MaxSeriesPerQuery, "max-series-per-query", c.Query.MaxSeriesPerQuery, "the most series a selector (match) may read at once (more: 400 naming match with the count; 0: no bound)")
	fs.IntVar(&c.Query.MaxPartitions, "max-partitions", c.Query.MaxPartitions, "the most partitions one page may plan to read (larger: 400 naming the resolution to use; 0: no bound)")
	DurationVar(fs, &c.Ingest.Lateness, "lateness", "points older than this on arrival go to the late table; rollups wait this long")
	DurationVar(fs, &c.Ingest.ClockSkew, "clock-skew", "how far in the future a point may be")
	fs.IntVar(&c.Ingest.MaxLabels, "max-labels", c.Ingest.MaxLabels, "labels one series may carry (0: unbounded)")
	c.RegisterImportFlags(fs)
	DurationVar(fs, &c.Rollup.Interval, "rollup-interval", "how often the rollup worker runs (0: only on demand)")
	fs.IntVar(&c.Rollup.Parallelism, "rollup-parallelism", c.Rollup.Parallelism, "series recomputed at once")
	DurationVar(fs, &c.Seal.Interval, "seal-interval", "how often final raw buckets are rewritten as compressed chunks (0: never)")
	fs.IntVar(&c.Seal.Parallelism, "seal-parallelism", c.Seal.Parallelism, "series sealed at once")
	DurationVar(fs, &c.Seal.Revisit, "seal-revisit", "how long a sealed bucket is sealed again, folding in rows that writers lagging past the lateness wrote")
	fs.Int64Var(&c.HTTP.MaxBodyBytes, "max-body-bytes", c.HTTP.MaxBodyBytes, "largest write body accepted (larger: 413)")
	fs.IntVar(&c.HTTP.MaxQueries, "max-queries", c.HTTP.MaxQueries, "most queries in one POST /v1/query, and series in one Grafana query")
	c.Prometheus.RegisterFlags(fs)
	c.HTTP.Limits.RegisterFlags(fs) // limits, timeouts, CORS and hosts
	c.Auth.RegisterFlags(fs)        // bearer tokens
	registerLayoutFlags(fs, &c.Layouts)
	c.Kafka.RegisterFlags(fs) // the consumer of points from Kafka
}

// RegisterImportFlags adds the flags of the import path, which `serve`
// (POST /v1/import) and `import` share.
func (c *Config) RegisterImportFlags(fs *flag.FlagSet) {
	DurationVar(fs, &c.Import.Margin, "import-margin", "imported points go to a tier only this far inside the retention of the tier their coarser windows are rolled up from")
}

// Finish completes the configuration once the flags are parsed: it builds
// the pyramid from --tiers and the per-tier flags.
func (c *Config) Finish() error {
	if c.tierFlags == nil {
		return nil
	}
	p, err := c.tierFlags.build()
	if err != nil {
		return err
	}
	c.Pyramid = p
	return nil
}

// Validate reports every setting that cannot work.
func (c Config) Validate() error {
	errs := []error{c.Pyramid.Validate(), c.Query.Validate(), c.Ingest.Validate(), c.Import.Validate(), c.Rollup.Validate(), c.Seal.Validate(), c.HTTP.Validate(), c.Prometheus.Validate(), c.Auth.Validate(), c.Layouts.Validate(), c.Kafka.Validate()}
	switch c.Store {
	case "embedded":
		if c.DataDir == "" {
			errs = append(errs, errors.New("--data-dir must be set for the embedded store"))
		}
		if c.EmbeddedMemTableBytes < 1<<20 || c.EmbeddedMemTableBytes > 1<<30 {
			errs = append(errs, fmt.Errorf("--embedded-memtable-bytes must be between 1 MiB and 1 GiB, not %d", c.EmbeddedMemTableBytes))
		}
		if !embedded.ValidCompression(c.EmbeddedCompression) {
			errs = append(errs, fmt.Errorf("--embedded-compression must be snappy or zstd, not %q", c.EmbeddedCompression))
		}
	case "cassandra":
		errs = append(errs, c.Cassandra.Validate())
	default:
		errs = append(errs, fmt.Errorf("--store must be embedded or cassandra, not %q", c.Store))
	}
	if c.CacheBytes < 0 || c.ResultsCacheBytes < 0 || c.SeriesCacheSize < 1 {
		errs = append(errs, errors.New("cache sizes must not be negative"))
	}
	return errors.Join(errs...)
}

// msFlag is a duration flag in the API's syntax (250ms, 5m, 7d, 1w), held in
// milliseconds.
type msFlag struct{ p *int64 }

func (f msFlag) String() string {
	if f.p == nil {
		return ""
	}
	return tiers.FormatDuration(*f.p)
}

func (f msFlag) Set(s string) error {
	d, err := params.Duration(s)
	if err != nil {
		return err
	}
	*f.p = d
	return nil
}

// durFlag is a time.Duration flag in the same syntax.
type durFlag struct{ p *time.Duration }

func (f durFlag) String() string {
	if f.p == nil {
		return ""
	}
	return tiers.FormatDuration(f.p.Milliseconds())
}

func (f durFlag) Set(s string) error {
	d, err := params.Duration(s)
	if err != nil {
		return err
	}
	*f.p = time.Duration(d) * time.Millisecond
	return nil
}

// DurationVar defines a time.Duration flag in the API's duration syntax
// (250ms, 90s, 36h, 7d, 1w).
func DurationVar(fs *flag.FlagSet, p *time.Duration, name, usage string) {
	fs.Var(durFlag{p}, name, usage)
}

func msVar(fs *flag.FlagSet, p *int64, name, usage string) { fs.Var(msFlag{p}, name, usage) }
