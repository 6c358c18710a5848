package cassandra

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

// TestOpenWithoutCluster opens a store whose only contact point refuses
// connections: Open returns a store that reports why it is not connected,
// from Ping and from every operation, until it is closed.
func TestOpenWithoutCluster(t *testing.T) {
	// A port that was just free: nothing listens on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	cfg := DefaultConfig()
	cfg.Hosts = []string{addr}
	cfg.ConnectTimeout = time.Second
	cfg.ReconnectInterval = 50 * time.Millisecond
	ctx := context.Background()
	start := time.Now()
	s, err := Open(ctx, cfg, tiers.DefaultPyramid(), nil)
	if err != nil {
		t.Fatalf("Open failed although it should keep connecting: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open took %s", d)
	}
	// Long enough for several background attempts.
	time.Sleep(300 * time.Millisecond)
	checks := map[string]error{"Ping": s.Ping(ctx)}
	_, checks["LookupSeries"] = s.LookupSeries(ctx, "a")
	_, checks["ListSeries"] = s.ListSeries(ctx, "", "", 10)
	checks["Write"] = s.Write(ctx, []tiers.PartitionWrite{{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "a"}, Retention: tiers.Day, Rows: []tiers.Row{{T: time.Now().UnixMilli(), Min: 1, Max: 1, Sum: 1, Count: 1}}}})
	_, checks["Read"] = s.Read(ctx, tiers.ReadRequest{Key: tiers.PartitionKey{Table: tiers.TableRaw, Series: "a"}, Span: tiers.Span{From: 0, To: 1}}).Next()
	_, checks["Secret"] = s.Secret(ctx, "k", func() ([]byte, error) { return []byte("v"), nil })
	_, _, checks["Checkpoint"] = s.Checkpoint(ctx, "c")
	for name, err := range checks {
		if !errors.Is(err, ErrNotConnected) {
			t.Errorf("%s: error %v, want ErrNotConnected", name, err)
			continue
		}
		// The reason names the address that refused.
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: error %q does not name %s", name, err, addr)
		}
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the background connection attempts")
	}
	if err := s.Ping(ctx); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Ping after Close: %v", err)
	}
}
