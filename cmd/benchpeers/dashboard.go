package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// writer sends the points that follow the data set to every side, as they
// arrive: the gateway by POST /v1/points, VictoriaMetrics by its import
// API, Prometheus by remote write.
type writer struct {
	b      *bench
	gauges []*gauge
	next   int // index of the next point of every series
}

func (b *bench) newWriter() *writer {
	w := &writer{b: b, next: b.d.points()}
	for i := range b.d.series {
		g := b.d.gauge(i)
		for range w.next {
			g.next()
		}
		w.gauges = append(w.gauges, g)
	}
	return w
}

// upTo writes every point up to now, in chunks of at most 10 minutes of
// all series (Prometheus takes samples roughly in time order only).
func (w *writer) upTo(ctx context.Context, now time.Time) (int, error) {
	last := w.b.d.index(now.UnixMilli() + 1) // first index after now
	written := 0
	for w.next < last {
		n := min(last-w.next, int(10*time.Minute/interval))
		if err := w.chunk(ctx, w.next, n); err != nil {
			return written, err
		}
		w.next += n
		written += n * len(w.gauges)
	}
	if written > 0 {
		// Searchable at once, as a point is on the other sides once its
		// write is answered.
		if _, _, err := fetch(w.b.client, w.b.vm.url+"/internal/force_flush"); err != nil {
			return written, err
		}
	}
	return written, nil
}

func (w *writer) chunk(ctx context.Context, k0, n int) error {
	var nd, vm bytes.Buffer
	wr := &prompb.WriteRequest{}
	var line []byte
	for i, g := range w.gauges {
		vals := make([]float64, n)
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: metric}, {Name: "dc", Value: dc(i)}, {Name: "host", Value: host(i)}}}
		for j := range vals {
			vals[j] = g.next()
			t := w.b.d.ts(k0 + j)
			line = fmt.Appendf(line[:0], `{"series":%q,"t":%d,"v":`, seriesID(i), t)
			line = strconv.AppendFloat(line, vals[j], 'f', -1, 64)
			line = append(line, "}\n"...)
			nd.Write(line)
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: vals[j]})
		}
		vm.Write(vmLine(i, vals, w.b.d.ts, k0))
		wr.Timeseries = append(wr.Timeseries, ts)
	}
	raw, err := wr.Marshal()
	if err != nil {
		return err
	}
	posts := []struct {
		url, ctype string
		body       []byte
		header     map[string]string
	}{
		{w.b.gw.url + "/v1/points", "application/x-ndjson", nd.Bytes(), nil},
		{w.b.vm.url + "/api/v1/import", "application/json", vm.Bytes(), nil},
		{w.b.prom.url + "/api/v1/write", "application/x-protobuf", snappy.Encode(nil, raw),
			map[string]string{"Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "0.1.0"}},
	}
	for _, p := range posts {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(p.body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", p.ctype)
		for k, v := range p.header {
			req.Header.Set(k, v)
		}
		resp, err := w.b.client.Do(req)
		if err != nil {
			return err
		}
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("POST %s: %s: %.300s", p.url, resp.Status, msg.String())
		}
	}
	return nil
}

// dashboard refreshes the panels of all series every refreshEvery while
// new points arrive, each panel's range ending at now (rounded down to the
// panel's step, as Grafana aligns it), so that the range slides with the
// clock. Every cache is on: the gateway's results cache, VictoriaMetrics'
// result cache. Each refresh's answers are compared across the sides; the
// first refresh fills the caches and is not timed.
func (b *bench) dashboard(ctx context.Context) error {
	b.gw.stop()
	b.gw.args = gatewayArgs(b.c, true)
	if err := b.gw.start(ctx, 2*time.Minute); err != nil {
		return err
	}
	w := b.newWriter()
	t0 := time.Now()
	n, err := w.upTo(ctx, t0)
	if err != nil {
		return err
	}
	logf("   %d points written from the end of the data set to now in %.1f s", n, time.Since(t0).Seconds())
	// Those points arrived late at once, which a live dashboard's never
	// do: the gateway shows late points in its rollup tiers after the
	// next rollup run (every 30 s by default), so one runs now, before
	// the dashboard starts.
	resp, err := b.client.Post(b.gw.url+"/v1/admin/rollups/run", "", nil)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gateway rollup run: %s", resp.Status)
	}

	var panels []panel
	for _, p := range b.panels {
		if p.all {
			panels = append(panels, p)
		}
	}
	ds := make([][nSides][]time.Duration, len(panels))
	mismatches := [nSides]int{}
	start := time.Now()
	for k := 0; k <= b.c.refreshes; k++ {
		slot := start.Add(time.Duration(k) * b.c.refreshEvery)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(slot)):
		}
		now := time.Now()
		if _, err := w.upTo(ctx, now); err != nil {
			return err
		}
		for pi, p := range panels {
			step := p.step().Milliseconds()
			to := now.UnixMilli() / step * step
			from := to - p.rng.Milliseconds()
			var answers [nSides]answer
			for j := range nSides {
				s := (side(k+pi) + j) % nSides
				if !b.timed(s, p) {
					continue
				}
				a, d, err := b.ask(s, p, from, to, "avg", false)
				if err != nil {
					return err
				}
				answers[s] = a
				if k > 0 {
					ds[pi][s] = append(ds[pi][s], d)
				}
			}
			for s := range prometheus {
				if !b.timed(s, p) {
					continue
				}
				if err := compare(answers[s], answers[prometheus], "avg"); err != nil {
					if mismatches[s] == 0 {
						b.notes = append(b.notes, fmt.Sprintf("refreshing dashboard, %s at refresh %d, %s: %s differs from Prometheus: %v",
							p.label(), k, rangeText(from, to), sideNames[s], err))
					}
					mismatches[s]++
				}
			}
		}
		if k > 0 && k%4 == 0 {
			logf("   refresh %d of %d", k, b.c.refreshes)
		}
	}
	for pi, p := range panels {
		r := row{panel: p, mode: "refreshing", n: b.c.refreshes}
		for s := range nSides {
			r.med[s] = median(ds[pi][s])
		}
		b.rows = append(b.rows, r)
		logf("   %s refreshing: %s", p.label(), r.text())
	}
	for i, s := range []*server{b.gw, b.vm, b.prom} {
		b.dashRSS[i] = peakRSS(s.pid())
	}
	for s, n := range mismatches {
		if n > 0 {
			b.notes = append(b.notes, fmt.Sprintf("%s differed from Prometheus in %d dashboard answers", sideNames[s], n))
		}
	}
	// The gateway must agree with Prometheus in every answer. A peer
	// that lags the points just written (VictoriaMetrics now and then
	// answers the newest window from the sample before, its buffers not
	// yet searchable although flushed) is noted, not failed: the run
	// measures the gateway.
	if mismatches[gwNative] > 0 || mismatches[gwPromQL] > 0 {
		b.failed = true
	}
	return nil
}
