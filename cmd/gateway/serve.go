package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tsgate/tsgate/demo"
	"github.com/tsgate/tsgate/flagconf"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/httpapi"
	"github.com/tsgate/tsgate/tiers"
)

// errUsage ends a command whose flags were wrong, after the flag package
// said why on stderr; errHelp one whose help was asked for and printed.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// serveConfig is everything `gateway serve` can be told: the gateway's
// configuration and the process's own settings.
type serveConfig struct {
	gateway.Config
	configFile      string
	addr            string
	demo            bool
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
}

func defaultServeConfig() serveConfig {
	return serveConfig{
		Config: gateway.DefaultConfig(),
		addr:   "127.0.0.1:8080", logLevel: "info", logFormat: "text", shutdownTimeout: 30 * time.Second,
	}
}

// registerStoreFlags adds the flags `serve` and `schema` share.
func (c *serveConfig) registerStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.configFile, "config", "", "YAML file with flag values (keys are flag names)")
	c.Config.RegisterStoreFlags(fs)
}

func (c *serveConfig) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.configFile, "config", "", "YAML file with flag values (keys are flag names)")
	c.Config.RegisterFlags(fs)
	fs.StringVar(&c.addr, "addr", c.addr, "address to listen on")
	fs.BoolVar(&c.demo, "demo", c.demo, "load generated demo series when the store is empty")
	fs.StringVar(&c.logLevel, "log-level", c.logLevel, "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", c.logFormat, "text or json")
	gateway.DurationVar(fs, &c.shutdownTimeout, "shutdown-timeout", "how long in-flight requests may take to finish on shutdown")
}

func (m Main) parseFlags(name string, args []string, register func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	// Errors are printed below, once, with the hint.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	register(fs)
	if err := flagconf.Parse(fs, args, "GATEWAY_", "config", m.LookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Asked for: the help goes to stdout and the command succeeds.
			fs.SetOutput(m.Stdout)
			fmt.Fprintf(m.Stdout, "usage: gateway %s [flags]\n\nEvery flag can also be set as GATEWAY_<FLAG> in the environment\nor as a key of the YAML file given with --config.\n\nflags:\n", name)
			fs.PrintDefaults()
			return errHelp
		}
		fmt.Fprintf(m.Stderr, "gateway %s: %v\nrun gateway %s -help for the flags\n", name, err, name)
		return errUsage
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

func (m Main) serve(ctx context.Context, args []string) error {
	c := defaultServeConfig()
	if err := m.parseFlags("serve", args, c.registerFlags); err != nil {
		return err
	}
	if err := c.Finish(); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	tokens, err := loadTokens(ctx, c.Auth, c.addr, log)
	if err != nil {
		return err
	}
	if _, set := m.LookupEnv("GOGC"); !set {
		// The caches take this much once reads fill them; until then the
		// collector need not run every few megabytes.
		defer gateway.HeapFloor(uint64(min(heapFloor, max(0, c.CacheBytes+c.ResultsCacheBytes))))()
	}
	opts := gateway.Options{Logger: log, Tokens: tokens, Version: version, Instruments: gateway.NewInstruments(version), Now: m.clock()}
	open := m.openStore
	if open == nil {
		open = gateway.OpenStore
	}
	store, err := open(ctx, c.Config, opts)
	if err != nil {
		return fmt.Errorf("open %s store: %w", c.Store, err)
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()
	return m.run(ctx, c, store, opts, log)
}

// heapFloor is the most heap a gateway lets grow before it collects
// while its live heap is small (gateway.HeapFloor), bounded by its caches'
// sizes.
const heapFloor = 64 << 20

// run serves on c.addr over an open store until ctx ends. One server owns
// the listener from the start and serves through a handoff: the starting
// handler until the store answers and the gateway is assembled over it
// (a gateway started before its store stays up, healthy and saying why it
// is not ready), then the gateway's handler. ctx ending stops it in every
// phase: waiting for the store, assembling, serving.
func (m Main) run(ctx context.Context, c serveConfig, store tiers.Store, opts gateway.Options, log *slog.Logger) error {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	var front handoff
	front.set(gateway.Starting(c.Config, opts, store.Ping))
	server := httpapi.NewHTTPServer(c.HTTP.Limits, &front, log, opts.Instruments.HTTP)
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(ln) }()
	shutdown := func() error {
		log.Info("shutting down: finishing in-flight requests", "timeout", c.shutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		defer cancel()
		if err := server.Shutdown(sctx); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	}

	g, err := m.assemble(ctx, c, store, opts, url, serveErr, log)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped before serving: not a failure.
			return shutdown()
		}
		_ = shutdown()
		return err
	}
	front.set(g.Handler())

	// The rollup and seal workers and the Kafka consumer stop once the server has:
	// the consumer commits what it wrote and leaves its group.
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		var sealer sync.WaitGroup
		if g.Sealer != nil {
			sealer.Go(func() { g.Sealer.Run(workerCtx) })
		}
		g.Rollups.Run(workerCtx)
		sealer.Wait()
	}()
	kafkaErr := make(chan error, 1)
	kafkaDone := make(chan struct{})
	go func() {
		defer close(kafkaDone)
		if g.Kafka != nil {
			if err := g.Kafka.Run(workerCtx); err != nil {
				kafkaErr <- err
			}
		}
	}()
	defer func() {
		stopWorker()
		<-workerDone
		<-kafkaDone
	}()
	log.Info("gateway listening", "url", url, "store", c.Store, "version", version)
	fmt.Fprintf(m.Stdout, "gateway %s serving on %s (store: %s)\n", version, url, c.Store)
	if g.Kafka != nil {
		fmt.Fprintf(m.Stdout, "consuming points from Kafka topic %s (group %s)\n", c.Kafka.Topic, c.Kafka.Group)
	}
	fmt.Fprintf(m.Stdout, "dashboard:     %s/\n", url)
	fmt.Fprintf(m.Stdout, "API reference: %s/docs (contract: %s/openapi.yaml)\n", url, url)
	fmt.Fprintf(m.Stdout, "try: curl '%s/v1/series'\n", url)
	if c.demo {
		fmt.Fprintf(m.Stdout, "     curl '%s/v1/series/demo.temperature.office/points?from=now-2h&resolution=raw&limit=5'\n", url)
		fmt.Fprintf(m.Stdout, "     curl '%s/v1/series/demo.power.meter1/points?from=now-2d&max_points=24&agg=min,max,avg'\n", url)
	}
	if m.Ready != nil {
		m.Ready(ln.Addr().String())
	}
	select {
	case err := <-serveErr:
		return err
	case err := <-kafkaErr:
		_ = shutdown()
		return err
	case <-ctx.Done():
		return shutdown()
	}
}

// assemble waits until the store answers, then assembles the gateway over
// it and loads the demo series if asked to. It gives up when ctx ends or
// the server fails.
func (m Main) assemble(ctx context.Context, c serveConfig, store tiers.Store, opts gateway.Options, url string, serveErr <-chan error, log *slog.Logger) (*gateway.Gateway, error) {
	if err := ping(ctx, store); err != nil {
		log.Warn("the store is not ready; answering probes until it is", "url", url, "err", err)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for err != nil {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case err := <-serveErr:
				return nil, err
			case <-tick.C:
			}
			err = ping(ctx, store)
		}
		log.Info("the store is ready")
	}
	g, err := gateway.New(ctx, store, c.Config, opts)
	if err != nil {
		return nil, err
	}
	if c.demo {
		if err := loadDemo(ctx, m, g, log); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// ping asks the store once, for at most two seconds.
func ping(ctx context.Context, store tiers.Store) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return store.Ping(pctx)
}

// handoff serves with the handler set last, so that the one server of the
// process can move from the starting handler to the gateway's.
type handoff struct{ h atomic.Pointer[http.Handler] }

func (f *handoff) set(h http.Handler) { f.h.Store(&h) }

func (f *handoff) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*f.h.Load()).ServeHTTP(w, r) }

// loadDemo fills an empty store with the demo series and rolls them up.
func loadDemo(ctx context.Context, m Main, g *gateway.Gateway, log *slog.Logger) error {
	existing, err := g.Store.ListSeries(ctx, "", "", 1)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if len(existing) > 0 {
		fmt.Fprintln(m.Stdout, "demo: the store already holds series; not loading demo data")
		return nil
	}
	start := time.Now()
	last := time.Time{}
	err = demo.Load(ctx, g.Writer, g.Now().UnixMilli(), func(done, total int64) {
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
	if _, err := g.Rollups.RunOnce(ctx, true); err != nil {
		return fmt.Errorf("demo rollups: %w", err)
	}
	log.Info("demo data loaded", "series", len(demo.All()), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}
