//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// cachedGateway is a gateway over the same store and clock as g, with the
// cache of final buckets and no results cache: what is timed is reading
// the buckets, not repeating an answer (BenchmarkRepeatedPanel and the
// peers' benchmark time that).
func (g *benchGateway) cachedGateway(b *testing.B, cacheBytes int64) *gateway.Gateway {
	b.Helper()
	gc := gateway.DefaultConfig()
	gc.Pyramid, gc.Query, gc.CacheBytes, gc.ResultsCacheBytes = g.pyramid, g.Config.Query, cacheBytes, 0
	gc.Rollup.Interval = 0
	gc.CursorKey = base64.StdEncoding.EncodeToString([]byte("benchmark cursor key, 32 bytes.."))
	gw, err := gateway.New(context.Background(), g.store, gc, gateway.Options{Now: g.clock.Now, Logger: storeLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return gw
}

// httpRead reads a whole answer over HTTP, uncompressed, following
// cursors of limit points, and hands each page's points section (the
// text between "points":[ and its closing bracket) to onPage. It returns
// the pages read. Bodies are read into one buffer kept between calls, as
// a client that reads many answers does, so httpRead is not for
// concurrent use.
func httpRead(b *testing.B, base, series, query string, limit int, onPage func(points []byte)) int {
	cursor := ""
	for pages := 1; ; pages++ {
		u, resp := getPage(b, base, series, query, limit, cursor)
		body, err := readBody(resp.Body, pageBuf[:0])
		resp.Body.Close()
		pageBuf = body
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d %v %.300s", u, resp.StatusCode, err, body)
		}
		i := bytes.Index(body, []byte(`"points":[`))
		j := bytes.LastIndex(body, []byte(`],"partial":`))
		if i < 0 || j < 0 {
			b.Fatalf("no points in %.300s", body)
		}
		onPage(body[i+len(`"points":[`) : j])
		var more bool
		if cursor, more = nextCursor(b, body[j:]); !more {
			return pages
		}
	}
}

// nextCursor reads the end of a page, after its points: the page must be
// complete; more says whether it has a next cursor.
func nextCursor(b *testing.B, tail []byte) (cursor string, more bool) {
	if bytes.Contains(tail, []byte(`"partial":true`)) {
		b.Fatalf("a page cut short: %.300s", tail)
	}
	k := bytes.Index(tail, []byte(`"next_cursor":"`))
	if k < 0 {
		return "", false
	}
	rest := tail[k+len(`"next_cursor":"`):]
	return string(rest[:bytes.IndexByte(rest, '"')]), true
}

// pageBuf is httpRead's body buffer.
var pageBuf []byte

// readBody reads r to its end into buf, growing it by doubling: reads as
// large as the free space, never the small first reads of io.ReadAll,
// which on a loopback connection cost more than the gateway's whole
// answer to a small read (for 123 KB: 187 µs against 34 µs per
// exchange, measured with a server that writes a fixed body).
func readBody(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf) < 64<<10 {
		buf = make([]byte, 0, 64<<10)
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// countPoints returns an onPage for httpRead that adds the points (or
// windows) of each page to *n.
func countPoints(n *int) func([]byte) {
	return func(pts []byte) { *n += bytes.Count(pts, []byte{'['}) }
}

// streamDecodeRead follows cursors like httpRead with decode set, but
// parses points as the body arrives, chunk by chunk, as a streaming
// client does: its parsing overlaps the transfer instead of following it.
// A point split between two reads is carried to the front of the one
// buffer it reads into.
func streamDecodeRead(b *testing.B, base, series, query string, limit int, out []point) []point {
	cursor := ""
	buf := make([]byte, 64<<10)
	for {
		u, resp := getPage(b, base, series, query, limit, cursor)
		var tail []byte
		state := 0 // 0: before the points, 1: in them, 2: after them
		kept := 0  // bytes at the front of buf not parsed yet
		for {
			if kept == len(buf) {
				buf = slices.Grow(buf[:kept], len(buf))[:2*len(buf)] // a point longer than the buffer
			}
			n, err := resp.Body.Read(buf[kept:])
			s := buf[:kept+n]
			if state == 0 {
				if i := bytes.Index(s, []byte(`"points":[`)); i >= 0 {
					s, state = s[i+len(`"points":[`):], 1
				}
			}
			for state == 1 && len(s) > 0 {
				if s[0] == ',' {
					s = s[1:]
					continue
				}
				if s[0] == ']' {
					state = 2
					break
				}
				e := bytes.IndexByte(s, ']')
				if e < 0 {
					break // the rest of this point is still on its way
				}
				out = decodePoints(b, s[:e+1], out)
				s = s[e+1:]
			}
			if state == 2 {
				tail, s = append(tail, s...), nil
			}
			kept = copy(buf, s)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatalf("GET %s: %v", u, err)
			}
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || state != 2 {
			b.Fatalf("GET %s: %d %.300s", u, resp.StatusCode, tail)
		}
		var more bool
		if cursor, more = nextCursor(b, tail); !more {
			return out
		}
	}
}

// decodePoints parses [[t,v],...] as a client that keeps every point does,
// with the gateway's own number reading (strconv's results, bit for bit,
// at a third of its cost for the numbers of points).
func decodePoints(b *testing.B, s []byte, out []point) []point {
	for len(s) > 0 && s[0] != ']' {
		if s[0] == ',' {
			s = s[1:]
		}
		c := bytes.IndexByte(s, ',')
		e := bytes.IndexByte(s, ']')
		t, err1 := jsonenc.ParseInt(s[1:c])
		v, err2 := jsonenc.ParseFloat(s[c+1 : e])
		if err1 != nil || err2 != nil {
			b.Fatalf("point %.40q: %v %v", s, err1, err2)
		}
		out = append(out, point{t, v})
		s = s[e+1:]
	}
	return out
}

// BenchmarkWarmCold reads final data over HTTP from a gateway without a
// cache (every read goes to Cassandra) and from one whose cache of final
// buckets holds it (filled by one read before the rounds), alternating:
// 2 and 7 days of raw 1 Hz points (limit 100,000, cursors followed), and
// 90 days of the hour tier (1/min points rolled up, 2,160 windows). The
// data comes three ways, as users write it: written live (the clock
// sweeps 90 days and points arrive in batches as they happen), imported
// over HTTP (POST /v1/import), and written after the fact over POST
// /v1/points (older than the lateness window: every point goes to the
// late table, every bucket has a late partition). The body is read into
// memory and its points counted; the warm answer's points must equal the
// cold answer's byte for byte.
func BenchmarkWarmCold(b *testing.B) {
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 130 * tiers.Day
	p[1].Retention = 130 * tiers.Day
	store, cfg := openBenchStore(b, p)
	g := newGateway(b, store, cfg, p, query.DefaultConfig())
	cold := httptest.NewServer(g.Handler())
	defer cold.Close()
	// The 90 days end on an hour-tier bucket boundary (buckets of 30 days),
	// so that every bucket the read needs can become final; the raw days
	// end an hour before.
	hourBucket := p[2].BucketWidth
	start := tiers.AlignDown(g.clock.Now().UnixMilli(), hourBucket) + hourBucket
	end90 := start + 90*tiers.Day
	end := end90 - tiers.Hour
	rawSpan := tiers.Span{From: end - 7*tiers.Day, To: end}
	minuteSpan := tiers.Span{From: start, To: end90}

	sources := strings.Split(*benchSources, ",")
	if slices.Contains(sources, "live") {
		t0 := time.Now()
		n := g.writeLive(b, cold.URL, map[string]tiers.Span{"live.raw": rawSpan}, map[string]tiers.Span{"live.minutes": minuteSpan}, start, end90)
		note(b, "live: %d points written in batches as the clock swept 90 days, in %s", n, time.Since(t0).Round(time.Millisecond))
	}
	// An hour on, every window of the sweep is past the lateness window:
	// the rollups about to run can cover them all.
	g.clock.Advance(time.Duration(end90+tiers.Hour-g.clock.Now().UnixMilli()) * time.Millisecond)
	for _, src := range []struct{ name, path string }{{"import", "/v1/import"}, {"late", "/v1/points"}} {
		if !slices.Contains(sources, src.name) {
			continue
		}
		t0 := time.Now()
		n := postHistory(b, cold.URL+src.path, src.name+".raw", rawSpan, tiers.Second) +
			postHistory(b, cold.URL+src.path, src.name+".minutes", minuteSpan, tiers.Minute)
		note(b, "%s: %d points of history written over POST %s in %s", src.name, n, src.path, time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	if _, err := g.Rollups.RunOnce(context.Background(), true); err != nil {
		b.Fatal(err)
	}
	note(b, "rolled up in %s", time.Since(t0).Round(time.Millisecond))
	warm := g.cachedGateway(b, 512<<20)
	hot := httptest.NewServer(warm.Handler())
	defer hot.Close()
	type readCase struct {
		name, series, query string
		points              int
		// repeat is how many reads, back to back, one sample times (the
		// sample is their mean). A single read after the other side's
		// pays the wake-up of parked threads; a dashboard's panels are
		// read back to back.
		repeat int
		// static adds a side: a server that writes the warm answer's bytes
		// as they are, the floor of an HTTP exchange of that size here.
		static bool
	}
	var raws, hours []readCase
	for _, src := range sources {
		raws = append(raws,
			readCase{src + "/raw-2d", src + ".raw", fmt.Sprintf("from=%d&to=%d&resolution=raw", end-2*tiers.Day, end), 2 * 86400, 1, false},
			readCase{src + "/raw-7d", src + ".raw", fmt.Sprintf("from=%d&to=%d&resolution=raw", end-7*tiers.Day, end), 7 * 86400, 1, false})
		q := fmt.Sprintf("from=%d&to=%d&resolution=1h&agg=min,max,avg,count", minuteSpan.From, minuteSpan.To)
		hours = append(hours,
			readCase{src + "/hour-90d", src + ".minutes", q, 90 * 24, 1, true},
			readCase{src + "/hour-90d-x20", src + ".minutes", q, 90 * 24, 20, true})
	}
	measure := func(c readCase) {
		// check reads the answer once more, out of the timed rounds, and
		// returns a hash of its points.
		check := func(base string) uint64 {
			h := fnv.New64a()
			httpRead(b, base, c.series, c.query, 100000, func(pts []byte) { h.Write(pts) })
			return h.Sum64()
		}
		read := func(base string) time.Duration {
			if *benchGC {
				// The cold side's garbage is not the warm side's to collect.
				runtime.GC()
			}
			t0 := time.Now()
			for range c.repeat {
				total := 0
				httpRead(b, base, c.series, c.query, 100000, countPoints(&total))
				if total != c.points {
					b.Fatalf("%s: %d points, want %d", c.name, total, c.points)
				}
			}
			return time.Since(t0) / time.Duration(c.repeat)
		}
		read(cold.URL)
		read(hot.URL) // fills the cache
		want := check(cold.URL)
		if check(hot.URL) != want {
			b.Fatalf("%s: the warm answer's points differ from the cold answer's", c.name)
		}
		sides := []string{"cold", "warm"}
		base := map[string]string{"cold": cold.URL, "warm": hot.URL}
		if c.static {
			_, resp := getPage(b, hot.URL, c.series, c.query, 100000, "")
			body, err := readBody(resp.Body, nil)
			resp.Body.Close()
			if err != nil {
				b.Fatal(err)
			}
			static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			}))
			defer static.Close()
			sides, base["static"] = append(sides, "static"), static.URL
		}
		res := rounds(b, *benchRounds, sides, func(_ int, side string) time.Duration { return read(base[side]) })
		if check(hot.URL) != want || check(cold.URL) != want {
			b.Fatalf("%s: the answer changed during the rounds", c.name)
		}
		cm, wm := median(res["cold"]), median(res["warm"])
		b.ReportMetric(float64(cm)/float64(wm), c.name+"-warm/cold-x")
		floor := ""
		if c.static {
			sm := median(res["static"])
			floor = fmt.Sprintf("; the same bytes from a static server %s (warm is %.2fx that)", sm.Round(time.Microsecond), float64(wm)/float64(sm))
		}
		note(b, "%s: %d points; cold %s, warm %s: %.1fx; warm %.1f M points/s%s", c.name, c.points, cm.Round(time.Microsecond), wm.Round(time.Microsecond),
			float64(cm)/float64(wm), float64(c.points)/wm.Seconds()/1e6, floor)
	}
	for _, c := range raws {
		measure(c)
	}
	// Rollup rows are final once older than the raw retention: no late
	// point can correct them.
	g.clock.Advance(131 * 24 * time.Hour)
	for _, c := range hours {
		measure(c)
	}
	h, mi := bucketStats(warm)
	note(b, "warm gateway cache: %.0f hits, %.0f misses", h, mi)
}

// writeLive writes points as they happen while the clock sweeps from start
// to end: one batch over POST /v1/points (NDJSON) per series every 12
// minutes of the clock, of the points of the last 12 minutes (on time:
// within the lateness window of 15 minutes) — raw series at 1 Hz, minute
// series at one point a minute, each over its span. It returns the points
// written.
func (g *benchGateway) writeLive(b *testing.B, base string, raw, minutes map[string]tiers.Span, start, end int64) int {
	b.Helper()
	const every = 12 * tiers.Minute
	n := 0
	var body bytes.Buffer
	for c := start; c < end; c += every {
		// The clock stands 9 minutes into the batch: its first point 9
		// minutes old, its last under 3 minutes ahead (the clock-skew
		// allowance is 5).
		g.clock.Advance(time.Duration(c+9*tiers.Minute-g.clock.Now().UnixMilli()) * time.Millisecond)
		batch := tiers.Span{From: c, To: min(c+every, end)}
		for _, set := range []struct {
			spans map[string]tiers.Span
			step  int64
		}{{raw, tiers.Second}, {minutes, tiers.Minute}} {
			for _, series := range slices.Sorted(maps.Keys(set.spans)) {
				span := set.spans[series].Intersect(batch)
				if span.Empty() {
					continue
				}
				body.Reset()
				n += appendNDJSON(&body, series, span, set.step)
				postBody(b, base+"/v1/points", &body)
			}
		}
	}
	return n
}

// postHistory writes one point every step over span to series with POST
// to url (NDJSON, 50,000 points a request) and returns the points written.
func postHistory(b *testing.B, url, series string, span tiers.Span, step int64) int {
	b.Helper()
	n := 0
	var body bytes.Buffer
	for from := span.From; from < span.To; from += 50000 * step {
		body.Reset()
		n += appendNDJSON(&body, series, tiers.Span{From: from, To: min(span.To, from+50000*step)}, step)
		postBody(b, url, &body)
	}
	return n
}

// appendNDJSON writes one point object per line, one every step over span,
// with benchValue values, and returns how many.
func appendNDJSON(w *bytes.Buffer, series string, span tiers.Span, step int64) int {
	n := 0
	for t := span.From; t < span.To; t += step {
		fmt.Fprintf(w, `{"series":%q,"t":%d,"v":%s}`+"\n", series, t, strconv.FormatFloat(benchValue(t), 'g', -1, 64))
		n++
	}
	return n
}

func postBody(b *testing.B, url string, body *bytes.Buffer) {
	b.Helper()
	if err := post(http.DefaultClient, url, "application/x-ndjson", body.Bytes()); err != nil {
		b.Fatal(err)
	}
}

func bucketStats(g *gateway.Gateway) (hits, misses float64) {
	mfs, err := g.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "tsgate_cache_hits_total":
			hits = mf.GetMetric()[0].GetCounter().GetValue()
		case "tsgate_cache_misses_total":
			misses = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return hits, misses
}

// BenchmarkIdealReader reads 2 days of raw 1 Hz points (48 hour buckets ×
// 4 event buckets) end to end: through the gateway over HTTP (no cache,
// limit 100,000, cursors followed, every point decoded by the client), and
// with a reader written by hand against gocql v2 that reads the same
// partitions with the same parallelism and page size, each bucket's
// partitions merged by sorting, points kept in order. A third side is the
// gateway in its default configuration, its cache of final buckets on,
// reading the data for the first time (a new gateway every round), and a
// fourth the gateway without cache read by a client that parses points as
// the body arrives. The sides alternate; the ratios of the medians are the
// gateway's overhead.
func BenchmarkIdealReader(b *testing.B) {
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 8 * tiers.Day
	store, cfg := openBenchStore(b, p)
	qc := query.DefaultConfig()
	g := newGateway(b, store, cfg, p, qc)
	end := tiers.AlignDown(g.clock.Now().UnixMilli(), tiers.Hour)
	span := tiers.Span{From: end - 2*tiers.Day, To: end}
	n := g.backfill(b, "bench.ideal", span, tiers.Second)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	s := newSession(b)
	ctx := context.Background()
	pageSize := min(cfg.PageSize, qc.Scan.PageSize)
	layout := p.Raw().DefaultLayout()
	cql := fmt.Sprintf("SELECT t, v FROM %s.%s WHERE series = ? AND bucket = ? AND eb = ? AND t >= ? AND t < ?", cfg.Keyspace, tiers.TableRaw)
	ideal := func(out []point) []point {
		type part struct {
			bucket tiers.Bucket
			eb     int
			rows   []point
		}
		var parts []*part
		for bk := range layout.Buckets(span, false) {
			for eb := range bk.EventBuckets {
				parts = append(parts, &part{bucket: bk, eb: eb})
			}
		}
		var eg errgroup.Group
		eg.SetLimit(qc.Scan.Parallelism)
		for _, pt := range parts {
			eg.Go(func() error {
				iter := s.Query(cql, "bench.ideal", pt.bucket.Start, int16(pt.eb), span.From, span.To).
					Consistency(gocql.LocalQuorum).PageSize(pageSize).IterContext(ctx)
				var x point
				dest := []any{&x.T, &x.V} // built once: Scan's arguments escape
				for iter.Scan(dest...) {
					pt.rows = append(pt.rows, x)
				}
				return iter.Close()
			})
		}
		if err := eg.Wait(); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(parts); {
			start := len(out)
			j := i
			for ; j < len(parts) && parts[j].bucket == parts[i].bucket; j++ {
				out = append(out, parts[j].rows...)
			}
			slices.SortFunc(out[start:], func(a, b point) int { return int(a.T - b.T) })
			i = j
		}
		return out
	}
	q := fmt.Sprintf("from=%d&to=%d&resolution=raw", span.From, span.To)
	bufs := map[string][]point{}
	cpu := cpuMeter{}
	read := func(side string) time.Duration {
		out := bufs[side][:0]
		base := srv.URL
		if side == "gateway-cache" {
			// The default configuration, cache on, reading what it has
			// never read: a new gateway every round, so every bucket is
			// loaded from Cassandra.
			fresh := httptest.NewServer(g.cachedGateway(b, gateway.DefaultConfig().CacheBytes).Handler())
			defer fresh.Close()
			base = fresh.URL
			// A gateway that has been running: the series, its layout and
			// the rollup watermarks known, none of the range's buckets.
			httpRead(b, base, "bench.ideal", fmt.Sprintf("from=%d&to=%d&resolution=raw", span.From-tiers.Hour, span.From), 10, func([]byte) {})
		}
		d := cpu.time(side, func() {
			switch side {
			case "ideal":
				out = ideal(out)
			case "gateway-stream":
				out = streamDecodeRead(b, base, "bench.ideal", q, 100000, out)
			default:
				httpRead(b, base, "bench.ideal", q, 100000, func(pts []byte) { out = decodePoints(b, pts, out) })
			}
		})
		if len(out) != n {
			b.Fatalf("%s: %d points, want %d", side, len(out), n)
		}
		bufs[side] = out
		return d
	}
	sides := []string{"ideal", "gateway", "gateway-cache", "gateway-stream"}
	for _, side := range sides {
		read(side)
	}
	for _, side := range sides[1:] {
		if !slices.Equal(bufs["ideal"], bufs[side]) {
			b.Fatalf("the points of side %s differ from the ideal reader's", side)
		}
	}
	clear(cpu)
	var res map[string][]time.Duration
	for b.Loop() {
		res = rounds(b, *benchRounds, sides, func(_ int, side string) time.Duration { return read(side) })
	}
	cpu.log(b, sides)
	// What each side asks of the node: partition reads it served, by table.
	for _, side := range sides {
		before := nodeReads(b, s, cfg.Keyspace)
		read(side)
		after := nodeReads(b, s, cfg.Keyspace)
		var per []string
		for _, t := range slices.Sorted(maps.Keys(after)) {
			if d := after[t] - before[t]; d > 0 {
				per = append(per, fmt.Sprintf("%s %d", t, d))
			}
		}
		note(b, "%s: the node served %s", side, strings.Join(per, ", "))
	}
	im, gm, cm, sm := median(res["ideal"]), median(res["gateway"]), median(res["gateway-cache"]), median(res["gateway-stream"])
	b.ReportMetric(float64(gm)/float64(im), "gateway/ideal-x")
	b.ReportMetric(float64(cm)/float64(im), "gateway-cache/ideal-x")
	b.ReportMetric(float64(sm)/float64(im), "gateway-stream/ideal-x")
	note(b, "%d points: ideal %s, gateway without cache %s: %.2fx; gateway with its cache, first read %s: %.2fx; without cache, client parsing as the body arrives %s: %.2fx", n,
		im.Round(time.Millisecond), gm.Round(time.Millisecond), float64(gm)/float64(im), cm.Round(time.Millisecond), float64(cm)/float64(im),
		sm.Round(time.Millisecond), float64(sm)/float64(im))
}

// BenchmarkReadRSS reports the peak heap of reading 1 and 7 days of raw
// 1 Hz points over HTTP following cursors (limit 100,000), and of one page
// of 100,000 points, with the cache of final buckets on (its entries
// included): it must stay flat as the range grows.
func BenchmarkReadRSS(b *testing.B) {
	const rssRepeats = 5
	// The body buffer other benchmarks of this process grew is not this
	// one's heap.
	pageBuf = nil
	p := tiers.DefaultPyramid()
	p.Raw().Retention = 8 * tiers.Day
	store, cfg := openBenchStore(b, p)
	g := newGateway(b, store, cfg, p, query.DefaultConfig())
	end := tiers.AlignDown(g.clock.Now().UnixMilli(), tiers.Hour) - tiers.Hour
	g.backfill(b, "bench.rss", tiers.Span{From: end - 7*tiers.Day, To: end}, tiers.Second)
	for _, cache := range []int64{0, 64 << 20} {
		gw := g.cachedGateway(b, cache)
		srv := httptest.NewServer(gw.Handler())
		for _, c := range []struct {
			name  string
			from  int64
			limit int
		}{{"1d", end - tiers.Day, 100000}, {"7d", end - 7*tiers.Day, 100000}, {"one-page-100k", end - tiers.Day, 100000}} {
			q := fmt.Sprintf("from=%d&to=%d&resolution=raw", c.from, end)
			// The sampled heap includes garbage not collected yet, so a
			// read's peak depends on where the collector's cycles fall; the
			// peak over several reads is what the read can cost, for a
			// short read as for a long one.
			var peak atomic.Uint64
			for range rssRepeats {
				stop := querytest.SampleHeap(&peak)
				if c.name == "one-page-100k" {
					resp, err := http.Get(fmt.Sprintf("%s/v1/series/bench.rss/points?%s&limit=%d", srv.URL, q, c.limit))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				} else {
					streamRead(b, srv.URL, "bench.rss", q, c.limit)
				}
				stop()
			}
			note(b, "cache %d MiB, %s: peak heap over %d reads %.1f MiB", cache>>20, c.name, rssRepeats, float64(peak.Load())/(1<<20))
			b.ReportMetric(float64(peak.Load())/(1<<20), fmt.Sprintf("cache%dMiB-%s-peak-MiB", cache>>20, c.name))
		}
		srv.Close()
	}
	for b.Loop() {
	}
}

// streamRead follows cursors as a streaming client does: each body passes
// through a small buffer and only its end, which holds the cursor, is kept
// — so that the heap the benchmark samples is the gateway's, not the
// client's copies of whole pages.
func streamRead(b *testing.B, base, series, query string, limit int) {
	cursor := ""
	for {
		u, resp := getPage(b, base, series, query, limit, cursor)
		tail := &tailKeeper{}
		_, err := io.CopyBuffer(tail, resp.Body, make([]byte, 32<<10))
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d %v %.300s", u, resp.StatusCode, err, tail.buf)
		}
		var more bool
		if cursor, more = nextCursor(b, tail.buf); !more {
			return
		}
	}
}

// getPage requests one page of a read, uncompressed: on loopback,
// compressing costs both sides CPU and saves nothing (Go's client would
// otherwise ask for gzip). It returns the URL and the response.
func getPage(b *testing.B, base, series, query string, limit int, cursor string) (string, *http.Response) {
	u := fmt.Sprintf("%s/v1/series/%s/points?%s&limit=%d", base, series, query, limit)
	if cursor != "" {
		u += "&cursor=" + url.QueryEscape(cursor)
	}
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return u, resp
}

// tailKeeper keeps the last 4 KiB written to it.
type tailKeeper struct{ buf []byte }

func (t *tailKeeper) Write(p []byte) (int, error) {
	const keep = 4 << 10
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*keep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	}
	return len(p), nil
}

// nodeReads is the node's count of local reads of each table of keyspace
// (system_views.local_read_latency), to tell the reads of one run.
func nodeReads(b *testing.B, s *gocql.Session, keyspace string) map[string]int64 {
	iter := s.Query("SELECT table_name, count FROM system_views.local_read_latency WHERE keyspace_name = ?", keyspace).Iter()
	out := map[string]int64{}
	var table string
	var n int64
	for iter.Scan(&table, &n) {
		out[table] = n
	}
	if err := iter.Close(); err != nil {
		b.Fatalf("read the node's read counts: %v", err)
	}
	return out
}
