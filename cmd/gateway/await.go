package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tsgate/tsgate/httpapi"
)

// awaitStore listens on addr and, until ping succeeds, answers probes there
// (httpapi.Starting): a gateway whose store is not reachable yet stays up,
// healthy and saying why it is not ready, instead of exiting. It returns the
// listener, still open, for the real server.
func awaitStore(ctx context.Context, addr string, ping func(context.Context) error, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = ping(pctx)
	cancel()
	if err == nil {
		return ln, nil
	}
	log.Warn("the store is not ready; answering probes until it is", "url", "http://"+ln.Addr().String(), "err", err)
	server := &http.Server{Handler: httpapi.Starting(ping), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(keepOpen{ln}) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(sctx)
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ln.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ping(pctx)
		cancel()
		if err == nil {
			log.Info("the store is ready")
			return ln, nil
		}
		if errors.Is(err, context.Canceled) {
			continue
		}
	}
}

// keepOpen keeps the listener open when the probe server shuts down.
type keepOpen struct{ net.Listener }

func (keepOpen) Close() error { return nil }
