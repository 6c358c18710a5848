// Command preview serves the dashboard over an in-memory embedded store
// filled with demo data, for looking at the page while working on it:
//
//	go run ./cmd/preview -addr 127.0.0.1:8090
//
// Besides the demo series of `gateway serve --demo` it writes series that
// show the page's corner cases: a long list of similar ids (paging of the
// list), one with an outage (gaps), one written every second (auto-refresh),
// and one whose older partitions fail to read (a partial answer).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/tsgate/tsgate/demo"
	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/embedded"
)

const flakySeries = "preview.flaky"

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	assets := flag.String("assets", "", "serve the dashboard from this directory (web/static) instead of the embedded copy, to see edits on reload")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr, *assets); err != nil {
		fmt.Fprintln(os.Stderr, "preview:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, assets string) error {
	store, err := embedded.OpenInMemory(embedded.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	now := time.Now
	cfg := gateway.DefaultConfig()
	cfg.Rollup.Interval = 20 * time.Second
	cfg.Rollup.Grace = 0
	g, err := gateway.New(ctx, store, cfg, gateway.Options{
		Now:    now,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// Only the answers' reads fail; the rollup worker reads the store.
		WrapReader: func(r tiers.PartitionReader) tiers.PartitionReader { return flakyReader{r, now} },
	})
	if err != nil {
		return err
	}
	writer, worker := g.Writer, g.Rollups

	start := time.Now()
	fmt.Println("preview: loading demo data…")
	if err := demo.Load(ctx, writer, now().UnixMilli(), func(int64, int64) {}); err != nil {
		return err
	}
	if err := loadExtras(ctx, writer, now().UnixMilli()); err != nil {
		return err
	}
	if _, err := worker.RunOnce(ctx, true); err != nil {
		return err
	}
	fmt.Printf("preview: loaded and rolled up in %s\n", time.Since(start).Round(time.Millisecond))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go worker.Run(ctx)
	go writeLive(ctx, writer)
	go func() {
		// The rollups are in the tiers, but reads use a tier only up to its
		// watermark, which moves once the log slot of the load has closed.
		next := tiers.AlignDown(now().UnixMilli(), tiers.DirtySlot) + tiers.DirtySlot
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(time.UnixMilli(next + 100))):
		}
		if _, err := worker.RunOnce(ctx, true); err != nil {
			fmt.Fprintln(os.Stderr, "preview: rollups:", err)
			return
		}
		fmt.Println("preview: the tiers' watermarks have moved; aggregated reads now use the minute, hour and day tiers")
	}()
	fmt.Printf("preview: serving on http://%s/\n", ln.Addr())
	h := g.Handler()
	if assets != "" {
		h = fromDisk(assets, h)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fromDisk serves / and /assets/ from dir, uncached.
func fromDisk(dir string, api http.Handler) http.Handler {
	files := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/assets/") {
			w.Header().Set("Cache-Control", "no-store")
			files.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// loadExtras writes the preview's own series.
func loadExtras(ctx context.Context, w *ingest.Writer, now int64) error {
	var pts []ingest.Point
	// Racks: many similar ids, more than one page of the series list.
	for r := 1; r <= 120; r++ {
		id := fmt.Sprintf("preview.rack-%03d.inlet_temp", r)
		for t := tiers.AlignDown(now-6*tiers.Hour, tiers.Minute); t < now; t += 5 * tiers.Minute {
			v := 22 + 3*math.Sin(float64(t)/float64(3*tiers.Hour)+float64(r)) + float64(r%7)*0.4
			pts = append(pts, ingest.Point{Series: id, T: t, V: math.Round(v*100) / 100})
		}
	}
	// Gappy: a queue depth sampled every 30 s, with a two-hour outage and
	// a shorter one.
	for t := tiers.AlignDown(now-2*tiers.Day, 30*tiers.Second); t < now; t += 30 * tiers.Second {
		age := now - t
		if (age > 20*tiers.Hour && age < 22*tiers.Hour) || (age > 5*tiers.Hour && age < 5*tiers.Hour+40*tiers.Minute) {
			continue
		}
		v := 40 + 30*math.Sin(float64(t)/float64(90*tiers.Minute)) + 10*math.Sin(float64(t)/float64(7*tiers.Minute))
		pts = append(pts, ingest.Point{Series: "preview.gappy.queue_depth", T: t, V: math.Round(math.Max(0, v))})
	}
	// Flaky: its older partitions fail to read (see flakyReader).
	for t := tiers.AlignDown(now-3*tiers.Day, tiers.Minute); t < now; t += tiers.Minute {
		v := 100 + 20*math.Sin(float64(t)/float64(4*tiers.Hour))
		pts = append(pts, ingest.Point{Series: flakySeries, T: t, V: math.Round(v*10) / 10})
	}
	for len(pts) > 0 {
		n := min(len(pts), 20000)
		if _, err := w.Backfill(ctx, pts[:n]); err != nil {
			return err
		}
		pts = pts[n:]
	}
	return nil
}

// writeLive writes preview.live every second, for auto-refresh.
func writeLive(ctx context.Context, w *ingest.Writer) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	v := 50.0
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-t.C:
			ms := at.UnixMilli()
			v = 0.9*v + 0.1*(50+25*math.Sin(float64(ms)/float64(10*tiers.Minute))) + float64(ms%7-3)
			_, _ = w.Write(ctx, []ingest.Point{{Series: "preview.live", T: ms, V: math.Round(v*10) / 10}})
		}
	}
}

// flakyReader fails the reads of flakySeries' raw partitions of the last
// two hours, like a replica that is down. It reads answers only: the rollup
// worker reads the store, so the series' tiers are complete.
type flakyReader struct {
	tiers.PartitionReader
	now func() time.Time
}

var errReplicaDown = errors.New("preview: replica down")

func (f flakyReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	if req.Key.Series == flakySeries && req.Key.Table == tiers.TableRaw &&
		req.Span.To > f.now().UnixMilli()-2*tiers.Hour {
		return failedPages{}
	}
	return f.PartitionReader.Read(ctx, req)
}

type failedPages struct{}

func (failedPages) Next() ([]tiers.Row, error) { return nil, errReplicaDown }
func (failedPages) Close() error               { return nil }
