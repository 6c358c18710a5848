package httpapi

import (
	"errors"
	"flag"
	"strings"
	"time"
)

// Limits are the bounds that keep one client, or many, from taking the
// gateway down: requests served at once, the size of one answer, slow or
// stalled connections, and where browsers may call from.
type Limits struct {
	// MaxInflight bounds requests served at once; MaxQueueWait is how long
	// one may wait for a slot before it is refused as overloaded.
	MaxInflight  int
	MaxQueueWait time.Duration
	// MaxResponsePoints bounds the points one answer holds across all its
	// queries and targets.
	MaxResponsePoints int
	// ReadHeaderTimeout bounds the time to send a request's headers,
	// BodyTimeout the time to send its body, and WriteTimeout the time an
	// answer may make no progress because the client stopped reading.
	ReadHeaderTimeout, BodyTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxNewSeriesPerBatch and MaxNewSeriesPerMinute bound the series
	// writes create (0: unbounded).
	MaxNewSeriesPerBatch, MaxNewSeriesPerMinute int
	// MaxConnections bounds open connections, MaxConnectionsPerClient
	// those from one address (0: unbounded); see connGuard.
	MaxConnections, MaxConnectionsPerClient int
	// AnswerMemory bounds the bytes of all answers being built and sent
	// at once (0: unbounded); a request that cannot reserve its share
	// within MaxQueueWait is refused as overloaded.
	AnswerMemory int64
	// CORSOrigins are the origins a browser may call /grafana from.
	CORSOrigins []string
	// AllowedHosts, when set, are the only Host headers answered.
	AllowedHosts []string
}

// DefaultLimits returns the defaults of the flags.
func DefaultLimits() Limits {
	return Limits{
		MaxInflight: 256, MaxQueueWait: time.Second, MaxResponsePoints: 1_000_000,
		ReadHeaderTimeout: 5 * time.Second, BodyTimeout: time.Minute, WriteTimeout: 5 * time.Minute,
		IdleTimeout: 2 * time.Minute, MaxConnections: 4096, MaxConnectionsPerClient: 512, AnswerMemory: 512 << 20,
		MaxNewSeriesPerBatch: 10_000, MaxNewSeriesPerMinute: 100_000,
	}
}

// RegisterFlags adds the flags of the limits.
func (l *Limits) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxInflight, "max-inflight", l.MaxInflight, "requests served at once; more wait for a slot")
	fs.DurationVar(&l.MaxQueueWait, "max-queue-wait", l.MaxQueueWait, "how long a request may wait for a slot before it is refused (503 overloaded)")
	fs.IntVar(&l.MaxResponsePoints, "max-response-points", l.MaxResponsePoints, "points one answer holds across its queries; each query's page is cut to its share and carries next_cursor")
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "time a client has to send a request's headers")
	fs.DurationVar(&l.BodyTimeout, "body-timeout", l.BodyTimeout, "time a client has to send a request's body")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "an answer that makes no progress this long (the client stopped reading) is cut off")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&l.MaxNewSeriesPerBatch, "max-new-series-per-batch", l.MaxNewSeriesPerBatch, "series one write may create (more: 400 naming points; 0: unbounded)")
	fs.IntVar(&l.MaxNewSeriesPerMinute, "max-new-series-per-minute", l.MaxNewSeriesPerMinute, "series all writes together may create per minute (more: 429; 0: unbounded)")
	fs.IntVar(&l.MaxConnections, "max-connections", l.MaxConnections, "open connections (0: unbounded); at the cap an idle one, else a half-sent one of the busiest client, is closed to make room")
	fs.IntVar(&l.MaxConnectionsPerClient, "max-connections-per-client", l.MaxConnectionsPerClient, "open connections from one client address (0: unbounded); more are closed on arrival (raise it behind a proxy)")
	fs.Int64Var(&l.AnswerMemory, "answer-memory-bytes", l.AnswerMemory, "memory all answers being built and sent may hold at once (0: unbounded); a request that cannot reserve its share within --max-queue-wait gets 503 overloaded")
	fs.Var(listFlag{&l.CORSOrigins}, "cors-origins", "comma-separated origins a browser may call /grafana from (Grafana's browser access mode); none by default")
	fs.Var(listFlag{&l.AllowedHosts}, "allowed-hosts", "comma-separated Host names (optionally host:port) answered; others get 421 (guards against DNS rebinding); empty: only loopback names on a loopback address, any name on others")
}

// Validate checks the limits.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxInflight < 1 {
		errs = append(errs, errors.New("--max-inflight must be at least 1"))
	}
	if l.MaxQueueWait < 0 {
		errs = append(errs, errors.New("--max-queue-wait must not be negative"))
	}
	if l.MaxResponsePoints < 1 {
		errs = append(errs, errors.New("--max-response-points must be at least 1"))
	}
	for name, d := range map[string]time.Duration{"read-header-timeout": l.ReadHeaderTimeout, "body-timeout": l.BodyTimeout, "write-timeout": l.WriteTimeout, "idle-timeout": l.IdleTimeout} {
		if d <= 0 {
			errs = append(errs, errors.New("--"+name+" must be positive"))
		}
	}
	if l.MaxNewSeriesPerBatch < 0 || l.MaxNewSeriesPerMinute < 0 {
		errs = append(errs, errors.New("--max-new-series-per-batch and --max-new-series-per-minute must not be negative"))
	}
	if l.AnswerMemory != 0 && l.AnswerMemory < 1<<20 {
		errs = append(errs, errors.New("--answer-memory-bytes must be 0 (unbounded) or at least 1 MiB"))
	}
	if l.MaxConnections < 0 || l.MaxConnectionsPerClient < 0 {
		errs = append(errs, errors.New("--max-connections and --max-connections-per-client must not be negative"))
	}
	for _, o := range l.CORSOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			errs = append(errs, errors.New("--cors-origins: "+o+" is not an origin (scheme://host[:port])"))
		}
	}
	return errors.Join(errs...)
}

// listFlag is a comma-separated list.
type listFlag struct{ p *[]string }

func (f listFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f listFlag) Set(s string) error {
	*f.p = nil
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f.p = append(*f.p, v)
		}
	}
	return nil
}
