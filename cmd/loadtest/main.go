// Command loadtest drives a gateway process with reads and writes beyond
// its --max-inflight and reports what it served and what it shed: per
// second, latency of the served requests against the same load at the
// limit, the gateway's memory before and after, any 5xx other than the
// overload 503, and whether every acknowledged write reads back. It is
// bounded in time (two phases of -duration) and talks to 127.0.0.1 only.
//
//	go build -o bin/gateway ./cmd/gateway
//	go run ./cmd/loadtest -gateway bin/gateway [-store cassandra -cassandra-hosts 127.0.0.1:9142]
//
// With -mode bigquery it measures instead the gateway's peak memory for one
// POST /v1/query of 100 raw reads, with and without the bound on the
// points of one answer; with -mode concurrent, for 32 such requests at
// once, with and without the memory budget for answers; with -mode flood,
// how a client is served while another floods the gateway with idle and
// slowloris connections.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	gateway, store, hosts, keyspace string
	inflight                        int
	duration                        time.Duration
	series                          int
	mode                            string
	queueWait                       time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.gateway, "gateway", "bin/gateway", "the gateway binary")
	flag.StringVar(&c.store, "store", "embedded", "embedded or cassandra")
	flag.StringVar(&c.hosts, "cassandra-hosts", "127.0.0.1:9142", "Cassandra contact points (loopback)")
	flag.StringVar(&c.keyspace, "keyspace", "tsgate_loadtest", "keyspace (created, and dropped by nobody: use a scratch one)")
	flag.IntVar(&c.inflight, "max-inflight", 64, "the gateway's --max-inflight; the overload phase runs 4× as many clients")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "length of each phase (at most 2m)")
	flag.IntVar(&c.series, "series", 100, "series written and read")
	flag.StringVar(&c.mode, "mode", "overload", "overload, bigquery, concurrent or flood")
	flag.DurationVar(&c.queueWait, "max-queue-wait", time.Second, "the gateway's --max-queue-wait")
	flag.Parse()
	c.duration = min(c.duration, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 4*c.duration+5*time.Minute)
	defer cancel()
	var err error
	switch c.mode {
	case "overload":
		err = overload(ctx, c)
	case "bigquery":
		err = bigQuery(ctx, c)
	case "concurrent":
		err = concurrentQueries(ctx, c)
	case "flood":
		err = flood(ctx, c)
	default:
		err = fmt.Errorf("-mode must be overload, bigquery, concurrent or flood")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// gateway is a running gateway process.
type gateway struct {
	cmd  *exec.Cmd
	base string
	dir  string
}

func startGateway(ctx context.Context, c config, extra ...string) (*gateway, error) {
	dir, err := os.MkdirTemp("", "tsgate-loadtest-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--rollup-interval", "0", "--log-level", "warn",
		"--max-inflight", strconv.Itoa(c.inflight), "--max-queue-wait", c.queueWait.String(), "--store", c.store}
	if c.store == "cassandra" {
		args = append(args, "--cassandra-hosts", c.hosts, "--keyspace", c.keyspace)
		schema := exec.CommandContext(ctx, c.gateway, "schema", "--apply", "--cassandra-hosts", c.hosts, "--keyspace", c.keyspace)
		if out, err := schema.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("gateway schema --apply: %v\n%s", err, out)
		}
	} else {
		args = append(args, "--data-dir", filepath.Join(dir, "data"))
	}
	cmd := exec.CommandContext(ctx, c.gateway, append(args, extra...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &gateway{cmd: cmd, dir: dir}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), " serving on "); ok {
			g.base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if g.base == "" {
		g.stop()
		return nil, errors.New("the gateway did not start")
	}
	return g, nil
}

func (g *gateway) stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(g.dir)
}

// memory is the gateway's resident memory and its peak, in MiB.
func (g *gateway) memory() (rss, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0}, Timeout: time.Minute}

// acked are the acknowledged points: series → t → v.
type acked struct {
	mu     sync.Mutex
	points map[string]map[int64]float64
}

func (a *acked) add(pts []point) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pts {
		m := a.points[p.Series]
		if m == nil {
			m = map[int64]float64{}
			a.points[p.Series] = m
		}
		m[p.T] = p.V
	}
}

type point struct {
	Series string  `json:"series"`
	T      int64   `json:"t"`
	V      float64 `json:"v"`
}

// phaseStats are one phase's counts per second and latencies.
type phaseStats struct {
	mu                sync.Mutex
	served, shed      map[int]int
	latencies         []time.Duration
	other5xx, errs    int
	first5xx          string
	readsOK, writesOK int
}

func (s *phaseStats) record(sec int, status int, d time.Duration, write bool, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case status == 503 && strings.Contains(body, "#problem/overloaded"):
		s.shed[sec]++
	case status >= 500:
		s.other5xx++
		if s.first5xx == "" {
			s.first5xx = fmt.Sprintf("%d %.200s", status, body)
		}
	case status == 200:
		s.served[sec]++
		s.latencies = append(s.latencies, d)
		if write {
			s.writesOK++
		} else {
			s.readsOK++
		}
	default:
		s.errs++
		if s.first5xx == "" {
			s.first5xx = fmt.Sprintf("%d %.200s", status, body)
		}
	}
}

func overload(ctx context.Context, c config) error {
	g, err := startGateway(ctx, c)
	if err != nil {
		return err
	}
	defer g.stop()
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	ids := make([]string, c.series)
	next := make([]atomic.Int64, c.series)
	for i := range ids {
		ids[i] = fmt.Sprintf("load.%03d", i)
	}
	ack := &acked{points: map[string]map[int64]float64{}}
	// One point per series first, so that every read finds its series.
	var seed []point
	for i, id := range ids {
		seed = append(seed, point{id, base + next[i].Add(1) - 1, 0})
	}
	b, _ := json.Marshal(map[string]any{"points": seed})
	resp, err := client.Post(g.base+"/v1/points", "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("seed: %d", resp.StatusCode)
	}
	ack.add(seed)
	rss0, _ := g.memory()
	fmt.Printf("store %s, --max-inflight %d, --max-queue-wait %v, phases of %v, gateway RSS at start %.0f MiB\n", c.store, c.inflight, c.queueWait, c.duration, rss0)
	var results []*phaseStats
	for _, clients := range []int{c.inflight, 4 * c.inflight} {
		st := &phaseStats{served: map[int]int{}, shed: map[int]int{}}
		results = append(results, st)
		start := time.Now()
		end := start.Add(c.duration)
		var wg sync.WaitGroup
		for w := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(clients)))
				for time.Now().Before(end) && ctx.Err() == nil {
					i := rng.IntN(c.series)
					write := rng.IntN(10) < 3
					var req *http.Request
					var pts []point
					if write {
						n := 50
						t0 := next[i].Add(int64(n)) - int64(n)
						for k := range n {
							pts = append(pts, point{ids[i], base + t0 + int64(k), float64(rng.IntN(1_000_000)) / 8})
						}
						b, _ := json.Marshal(map[string]any{"points": pts})
						req, _ = http.NewRequestWithContext(ctx, "POST", g.base+"/v1/points", bytes.NewReader(b))
						req.Header.Set("Content-Type", "application/json")
					} else {
						req, _ = http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/series/%s/points?from=%d&resolution=raw&limit=1000&order=desc", g.base, ids[i], base), nil)
					}
					t := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						st.mu.Lock()
						st.errs++
						if st.first5xx == "" {
							st.first5xx = err.Error()
						}
						st.mu.Unlock()
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					d := time.Since(t)
					if write && resp.StatusCode == 200 {
						ack.add(pts)
					}
					st.record(int(t.Sub(start)/time.Second), resp.StatusCode, d, write, string(body))
					if resp.StatusCode == 503 {
						// A client honouring Retry-After would wait; a load
						// test that waits would not overload. Back off a little.
						time.Sleep(time.Duration(10+rng.IntN(20)) * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		rss, peak := g.memory()
		report(clients, c.inflight, st, c.duration, rss, peak)
	}
	fmt.Printf("\nlatency of served requests, p50 / p99: at the limit %v / %v; at 4× the limit %v / %v\n",
		pct(results[0].latencies, 50), pct(results[0].latencies, 99), pct(results[1].latencies, 50), pct(results[1].latencies, 99))
	return verify(ctx, g, ack, base)
}

func report(clients, limit int, st *phaseStats, d time.Duration, rss, peak float64) {
	fmt.Printf("\n%d clients (%.0f× --max-inflight):\n", clients, float64(clients)/float64(limit))
	fmt.Printf("  second  served  shed\n")
	secs := int(d / time.Second)
	var served, shed int
	for s := range secs {
		fmt.Printf("  %6d  %6d  %4d\n", s, st.served[s], st.shed[s])
		served += st.served[s]
		shed += st.shed[s]
	}
	fmt.Printf("  total served %d (%.0f/s; %d reads, %d writes), shed %d (%.0f/s), other 5xx %d, other failures %d\n",
		served, float64(served)/d.Seconds(), st.readsOK, st.writesOK, shed, float64(shed)/d.Seconds(), st.other5xx, st.errs)
	if st.first5xx != "" {
		fmt.Printf("  first failure: %s\n", st.first5xx)
	}
	fmt.Printf("  served latency p50 %v, p99 %v; gateway RSS %.0f MiB (peak %.0f MiB)\n", pct(st.latencies, 50), pct(st.latencies, 99), rss, peak)
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}

// verify reads every series back raw, following cursors, and checks that
// every acknowledged point is there with its value.
func verify(ctx context.Context, g *gateway, ack *acked, base int64) error {
	missing, total := 0, 0
	for id, want := range ack.points {
		got := map[int64]float64{}
		cursor := ""
		for {
			u := fmt.Sprintf("%s/v1/series/%s/points?from=%d&to=now%%2B1m&resolution=raw&limit=100000&slo=1m", g.base, id, base)
			if cursor != "" {
				u += "&cursor=" + cursor
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			var page struct {
				Points     [][2]float64 `json:"points"`
				NextCursor string       `json:"next_cursor"`
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				return fmt.Errorf("reading %s back: %d %v", id, resp.StatusCode, err)
			}
			for _, p := range page.Points {
				got[int64(p[0])] = p[1]
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		for t, v := range want {
			total++
			if gv, ok := got[t]; !ok || gv != v {
				missing++
			}
		}
	}
	fmt.Printf("\nacknowledged points read back: %d of %d\n", total-missing, total)
	if missing > 0 {
		return fmt.Errorf("%d acknowledged points are missing or differ", missing)
	}
	return nil
}

// bigQuery measures the gateway's peak memory for one batch of 100 raw
// reads of 20,000 points each, under the given bounds on an answer.
func bigQuery(ctx context.Context, c config) error {
	for _, bound := range []int{1_000_000_000, 1_000_000, 100_000} {
		g, err := startGateway(ctx, c, "--max-response-points", strconv.Itoa(bound), "--max-body-bytes", strconv.Itoa(64<<20))
		if err != nil {
			return err
		}
		body, err := seedBigQuery(g)
		if err != nil {
			g.stop()
			return err
		}
		rss0, peak0 := g.memory()
		start := time.Now()
		resp, err := client.Post(g.base+"/v1/query", "application/json", strings.NewReader(body))
		if err != nil {
			g.stop()
			return err
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		elapsed := time.Since(start)
		rss1, peak1 := g.memory()
		fmt.Printf("--max-response-points %d: status %d, %d MiB answer in %v; RSS %.0f → %.0f MiB, peak %.0f → %.0f MiB (+%.0f)\n",
			bound, resp.StatusCode, n>>20, elapsed.Round(time.Millisecond), rss0, rss1, peak0, peak1, peak1-peak0)
		g.stop()
	}
	return nil
}

// seedBigQuery writes 100 series of 20,000 raw points and returns the
// body of one POST /v1/query (3.7 KB) that reads them all raw.
func seedBigQuery(g *gateway) (string, error) {
	const perSeries = 20_000
	base := time.Now().Add(-time.Hour).UnixMilli()
	var queries []string
	for i := range 100 {
		id := fmt.Sprintf("big.%03d", i)
		queries = append(queries, fmt.Sprintf(`{"series":%q}`, id))
		pts := make([]point, perSeries)
		for k := range pts {
			pts[k] = point{id, base + int64(k)*100, float64(k)}
		}
		b, _ := json.Marshal(map[string]any{"points": pts})
		resp, err := client.Post(g.base+"/v1/points", "application/json", bytes.NewReader(b))
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("seed: %d", resp.StatusCode)
		}
	}
	return fmt.Sprintf(`{"from":%d,"to":"now","resolution":"raw","limit":100000,"slo":"1m","queries":[%s]}`, base, strings.Join(queries, ",")), nil
}

// concurrentQueries measures the gateway's peak memory while 32 clients
// send the 100-query batch of bigQuery at once (each answer is capped at
// the default 1,000,000 points, ~85 MiB), with the memory budget for
// answers at its default and without it.
func concurrentQueries(ctx context.Context, c config) error {
	const clients = 32
	for _, budget := range []string{"134217728", "268435456", "536870912", "0"} {
		g, err := startGateway(ctx, c, "--answer-memory-bytes", budget, "--max-body-bytes", strconv.Itoa(64<<20), "--max-queue-wait", "30s")
		if err != nil {
			return err
		}
		body, err := seedBigQuery(g)
		if err != nil {
			g.stop()
			return err
		}
		rss0, peak0 := g.memory()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		var bytesIn atomic.Int64
		for range clients {
			wg.Go(func() {
				resp, err := client.Post(g.base+"/v1/query", "application/json", strings.NewReader(body))
				status := -1
				if err == nil {
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					bytesIn.Add(n)
					status = resp.StatusCode
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		rss1, peak1 := g.memory()
		fmt.Printf("--answer-memory-bytes %s: %d clients at once, statuses %v, %d MiB answered in %v; RSS %.0f → %.0f MiB, peak %.0f → %.0f MiB (+%.0f)\n",
			budget, clients, statuses, bytesIn.Load()>>20, elapsed.Round(time.Millisecond), rss0, rss1, peak0, peak1, peak1-peak0)
		g.stop()
	}
	return nil
}

// flood measures whether one client that floods the gateway with
// connections keeps a well-behaved one out: from 127.0.0.2 it holds 4,096
// idle keep-alive connections and 10,000 slowloris connections (headers
// begun, a byte a second, reopened 5 s after being cut), while a client on 127.0.0.1
// asks /v1/series and /healthz every 50 ms for -duration. It reports that
// client's latency and failures, and what the flood could hold open.
func flood(ctx context.Context, c config) error {
	g, err := startGateway(ctx, c)
	if err != nil {
		return err
	}
	defer g.stop()
	addr := strings.TrimPrefix(g.base, "http://")
	fctx, stop := context.WithTimeout(ctx, c.duration+20*time.Second)
	defer stop()
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	var open, dials atomic.Int64
	var wg sync.WaitGroup
	hold := func(first string, trickle bool) {
		defer wg.Done()
		for fctx.Err() == nil {
			conn, err := attacker.DialContext(fctx, "tcp", addr)
			dials.Add(1)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			open.Add(1)
			_ = conn.SetDeadline(time.Now().Add(c.duration + 30*time.Second))
			_, err = io.WriteString(conn, first)
			if !trickle && err == nil {
				// An idle keep-alive: read the answer, then stay silent.
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					_, err = conn.Read(make([]byte, 1))
				}
			}
			for trickle && err == nil && fctx.Err() == nil {
				time.Sleep(time.Second)
				_, err = io.WriteString(conn, "a")
			}
			conn.Close()
			open.Add(-1)
			// Cut: open it again, as slowloris does, a few seconds later.
			select {
			case <-fctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	for range 4096 {
		wg.Add(1)
		go hold("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", false)
	}
	for range 10000 {
		wg.Add(1)
		go hold("GET /v1/series HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", true)
	}
	time.Sleep(10 * time.Second) // the flood builds up
	good := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}, Timeout: 30 * time.Second}
	var lat []time.Duration
	failures := map[string]int{}
	end := time.Now().Add(c.duration)
	for i := 0; time.Now().Before(end); i++ {
		path := "/v1/series?limit=10"
		if i%2 == 1 {
			path = "/healthz"
		}
		start := time.Now()
		resp, err := good.Get(g.base + path)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			failures[err.Error()]++
		} else {
			lat = append(lat, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := open.Load()
	stop()
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	fmt.Printf("flood of 4,096 idle + 10,000 slowloris from 127.0.0.2 (%d dials, %d open at the end): the other client got %d answers, p50 %v, p99 %v, max %v; failures %v\n",
		dials.Load(), held, len(lat), q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond), q(1).Round(time.Microsecond), failures)
	return nil
}
