//go:build integration

package integration

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/rs/zerolog"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

var benchLatencyDays = flag.Int("bench.latency-days", 7, "BenchmarkFanOutLatency: days of 1 Hz points read (96 partitions a day)")

// ---------------------------------------------------------------------------
// Fan-out over a network: the same comparison as BenchmarkFanOut with a
// round trip that costs what it costs between machines.

// latencies are the delays added each way between the client and the node;
// 0 is the proxy alone, for comparison with BenchmarkFanOut.
var latencies = []time.Duration{0, time.Millisecond, 5 * time.Millisecond}

// BenchmarkFanOutLatency is BenchmarkFanOut with the node behind a
// Toxiproxy proxy, run as a library in the benchmark process, that delays
// every byte by +1 ms, then +5 ms, each way (and first by nothing: the
// proxy's own cost). On a single loopback node the
// fan-out is bounded by the two cores (docs/benchmarks.md, Fan-out); with
// a network round trip per query, the sequential loop pays it once per
// partition, in a row, and the fan-out overlaps up to its read parallelism.
//
// Both sides go through the proxy: the gateway's store reaches the node by
// its address map (--cassandra-address-map), the sequential loop's session
// by a driver address translator doing the same. The data is loaded
// directly, before the proxy exists. For each latency the sides alternate
// over -bench.rounds rounds; every read is checked point for point, and
// every sequential read must take at least one round trip per partition
// (else a connection bypassed the proxy).
func BenchmarkFanOutLatency(b *testing.B) {
	days := *benchLatencyDays
	p := tiers.DefaultPyramid()
	p.Raw().Retention = int64(days+1) * tiers.Day
	store, cfg := openBenchStore(b, p)
	loader := newGateway(b, store, cfg, p, query.DefaultConfig())
	const series = "bench.fanout.latency"
	end := tiers.AlignDown(loader.clock.Now().UnixMilli(), tiers.Hour)
	span := tiers.Span{From: end - int64(days)*tiers.Day, To: end}
	start := time.Now()
	n := loader.backfill(b, series, span, tiers.Second)
	note(b, "loaded %d points in %s, directly (%.0f points/s through Writer.Backfill)", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	layout := p.Raw().DefaultLayout()
	buckets, partitions := layout.CountBuckets(span)
	if n != days*86400 || buckets != days*24 || partitions != days*96 {
		b.Fatalf("%d points in %d buckets, %d partitions; want %d, %d, %d", n, buckets, partitions, days*86400, days*24, days*96)
	}
	if partitions < 100 {
		b.Fatalf("%d partitions: -bench.latency-days must be at least 2 for the comparison to mean something", partitions)
	}

	ctx := context.Background()
	px := newLatencyProxy(b, hosts[0])
	pcfg := cfg
	pcfg.Hosts = []string{px.Listen}
	pcfg.AddressMap = hosts[0] + "=" + px.Listen
	before := px.accepted.Load()
	pstore, err := cassandra.Open(ctx, pcfg, p, storeLogger())
	if err != nil {
		b.Fatalf("open the store through the proxy: %v", err)
	}
	b.Cleanup(func() { pstore.Close() })
	qc := query.DefaultConfig()
	g := newGateway(b, pstore, pcfg, p, qc)
	qc.MaxLimit = 1000000
	g1 := newGateway(b, pstore, pcfg, p, qc)
	if px.accepted.Load() == before {
		b.Fatalf("the store opened no connection through the proxy at %s: the address map is not applied", px.Listen)
	}
	before = px.accepted.Load()
	s := proxiedSession(b, hosts[0], px.Listen)
	if px.accepted.Load() == before {
		b.Fatalf("the session opened no connection through the proxy at %s", px.Listen)
	}

	pageSize := min(cfg.PageSize, qc.Scan.PageSize)
	sides := []string{"sequential", "gateway-cursors", "gateway-one-page"}
	bufs := map[string][]point{}
	stats := map[string]query.Stats{}
	pages := map[string]int{}
	var latency time.Duration
	cpu := map[time.Duration]cpuMeter{}
	read := func(side string) time.Duration {
		out := bufs[side][:0]
		if out == nil {
			out = make([]point, 0, n)
		}
		if cpu[latency] == nil {
			cpu[latency] = cpuMeter{}
		}
		d := cpu[latency].time(side, func() {
			switch side {
			case "sequential":
				out = readSequential(b, ctx, s, cfg.Keyspace, series, span, layout, pageSize, out)
			case "gateway-cursors":
				var st query.Stats
				out, pages[side], st = readGateway(b, ctx, g.Engine, series, span, 100000, out)
				stats[side] = st
			case "gateway-one-page":
				var st query.Stats
				out, pages[side], st = readGateway(b, ctx, g1.Engine, series, span, 1000000, out)
				stats[side] = st
			}
		})
		bufs[side] = out
		checkPoints(b, side, out, span, n)
		if floor := time.Duration(partitions) * 2 * latency; side == "sequential" && d < floor {
			b.Fatalf("sequential read of %d partitions took %s at +%s each way, less than one round trip per partition (%s): a connection bypasses the proxy", partitions, d, latency, floor)
		}
		return d
	}

	// One timed iteration (-benchtime 1x): both latencies, each warmed
	// up, then its rounds.
	results := map[time.Duration]map[string][]time.Duration{}
	for b.Loop() {
		for _, l := range latencies {
			latency = l
			px.setLatency(b, l)
			for _, side := range sides {
				read(side)
			}
			checkRoundTrip(b, g.Engine, series, span, l)
			clear(cpu[l])
			results[l] = rounds(b, *benchRounds, sides, func(_ int, side string) time.Duration { return read(side) })
		}
	}
	for _, l := range latencies {
		res := results[l]
		tag := fmt.Sprintf("+%dms-", l.Milliseconds())
		seq := median(res["sequential"])
		line := []string{fmt.Sprintf("sequential %s", seq.Round(time.Millisecond))}
		for _, side := range sides {
			m := median(res[side])
			b.ReportMetric(ms(m), tag+side+"-ms")
			if side != "sequential" {
				b.ReportMetric(float64(seq)/float64(m), tag+side+"-speedup-x")
				line = append(line, fmt.Sprintf("%s %s (%.2fx)", side, m.Round(time.Millisecond), float64(seq)/float64(m)))
			}
		}
		note(b, "+%s each way, medians over %d rounds of %d partitions: %s", l, *benchRounds, partitions, strings.Join(line, ", "))
		note(b, "+%s each way, where the time goes:", l)
		cpu[l].log(b, sides)
	}
	for _, side := range sides[1:] {
		note(b, "%s: %d pages, %d buckets, %d partitions, %d rows read", side, pages[side], stats[side].Buckets, stats[side].Partitions, stats[side].RowsRead)
	}
}

// checkRoundTrip fails unless a gateway read of the last hour of span (4
// partitions, read at once) takes at least one round trip at latency l
// each way: else the store reaches the node some other way than the proxy.
func checkRoundTrip(b *testing.B, e query.Engine, series string, span tiers.Span, l time.Duration) {
	b.Helper()
	t0 := time.Now()
	res, err := e.Query(context.Background(), query.Request{Series: series, From: params.At(span.To - tiers.Hour), To: params.At(span.To), Resolution: router.Resolution{Kind: router.RawPoints}, Limit: 100000})
	if err != nil {
		b.Fatal(err)
	}
	rows := 0
	for res.Next() {
		rows++
	}
	res.Close()
	if rows != 3600 {
		b.Fatalf("a gateway read of one hour returned %d points, want 3600", rows)
	}
	if d := time.Since(t0); d < 2*l {
		b.Fatalf("a gateway read of one hour took %s at +%s each way, less than a round trip: the store bypasses the proxy", d, l)
	}
}

// checkPoints fails unless out is exactly the n points written over span,
// one a second, in order.
func checkPoints(b *testing.B, side string, out []point, span tiers.Span, n int) {
	b.Helper()
	if len(out) != n {
		b.Fatalf("%s read %d points, want %d", side, len(out), n)
	}
	for i, pt := range out {
		if want := span.From + int64(i)*tiers.Second; pt.T != want || pt.V != benchValue(want) {
			b.Fatalf("%s: point %d = %+v, want t=%d v=%v", side, i, pt, want, benchValue(want))
		}
	}
}

// latencyProxy is a Toxiproxy proxy, in the benchmark process, in front of
// the node, and the number of connections it accepted.
type latencyProxy struct {
	*toxiproxy.Proxy
	accepted *atomic.Int64
}

// acceptCount counts Toxiproxy's "Accepted client" log lines.
type acceptCount struct{ n *atomic.Int64 }

func (c acceptCount) Write(p []byte) (int, error) {
	c.n.Add(int64(strings.Count(string(p), "Accepted client")))
	return len(p), nil
}

// newLatencyProxy starts a proxy to upstream on a free port of 127.0.1.1
// (an address of its own, as the driver tells nodes apart by IP) and stops
// it when the benchmark ends.
func newLatencyProxy(b *testing.B, upstream string) latencyProxy {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.1.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := &atomic.Int64{}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.New(acceptCount{n}).Level(zerolog.InfoLevel))
	p := latencyProxy{toxiproxy.NewProxy(server, "node", addr, upstream), n}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	return p
}

// setLatency delays every byte by d in each direction, replacing the delay
// set before.
func (p latencyProxy) setLatency(b *testing.B, d time.Duration) {
	b.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		name := "latency-" + stream
		_ = p.Toxics.RemoveToxic(context.Background(), name) // absent the first time
		js := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":0}}`, name, stream, d.Milliseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			b.Fatal(err)
		}
	}
}

// proxiedSession is a session of the integration tests' configuration that
// reaches node only through the proxy at via: the contact point is the
// proxy, and the node's own address, as it advertises it, is translated to
// the proxy's.
func proxiedSession(b *testing.B, node, via string) *gocql.Session {
	b.Helper()
	from, err := net.ResolveTCPAddr("tcp", node)
	if err != nil {
		b.Fatal(err)
	}
	to, err := net.ResolveTCPAddr("tcp", via)
	if err != nil {
		b.Fatal(err)
	}
	c := newCluster()
	c.Hosts = []string{via}
	c.AddressTranslator = gocql.AddressTranslatorFunc(func(ip net.IP, port int) (net.IP, int) {
		if ip.Equal(from.IP) && port == from.Port {
			return to.IP, to.Port
		}
		return ip, port
	})
	s, err := c.CreateSession()
	if err != nil {
		b.Fatalf("connect through %s: %v", via, err)
	}
	b.Cleanup(s.Close)
	return s
}
