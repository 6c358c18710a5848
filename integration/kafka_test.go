//go:build integration

package integration

// Kafka ingest against a real broker and a real Cassandra node: the
// gateway binary runs as a process of its own (as an operator runs it),
// consuming a topic in a consumer group, and is killed with SIGKILL, shares
// the topic with a second gateway, loses its store behind a proxy and
// meets records that can never be written. make integration-test runs
// these tests under scripts/kafka.sh run, which sets KAFKA_BROKERS; without
// it they fail, they never skip.
//
// The gateway binary keeps the wall clock, so the points are placed
// relative to the moment each test starts, half of them older than the
// lateness (the late table) and half newer (the raw table); every check
// compares with what was produced, whatever the time of day.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// kafkaBrokers are the brokers of KAFKA_BROKERS.
func kafkaBrokers(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, b := range strings.Split(os.Getenv("KAFKA_BROKERS"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Fatal("KAFKA_BROKERS is not set; run under scripts/kafka.sh run (make integration-test does)")
	}
	return out
}

// kafkaAdmin is a client of the test brokers, closed when the test ends.
func kafkaAdmin(t testing.TB) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaBrokers(t)...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// newTopic creates a topic of a unique name with the given partitions,
// and its dead-letter topic, and deletes both when the test ends.
func newTopic(t testing.TB, adm *kadm.Client, partitions int32) string {
	t.Helper()
	topic := fmt.Sprintf("it.%s.%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", ".")), time.Now().UnixNano()%1e9)
	ctx := testContext(t)
	for _, c := range []struct {
		name string
		n    int32
	}{{topic, partitions}, {topic + ".dead-letter", 1}} {
		resp, err := adm.CreateTopic(ctx, c.n, 1, nil, c.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", c.name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topic, topic+".dead-letter")
	})
	return topic
}

// kafkaKeyspace is a fresh keyspace with the store's tables, and the
// flags that point a gateway at it.
func kafkaKeyspace(t *testing.T) (cassandra.Config, []string) {
	t.Helper()
	s := newSession(t)
	cfg := storeConfig(t, s, newKeyspace(t, s))
	if err := cassandra.ApplySchema(testContext(t), cfg, tiers.DefaultPyramid()); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	return cfg, []string{"--store", "cassandra", "--cassandra-hosts", strings.Join(cfg.Hosts, ","), "--keyspace", cfg.Keyspace,
		"--cassandra-consistency", cfg.Consistency, "--cassandra-local-dc", cfg.LocalDC}
}

// buildGatewayBinary builds the gateway command into a temporary directory.
func buildGatewayBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gatewayProcess is `gateway serve` running as a process of its own.
type gatewayProcess struct {
	name   string
	url    string
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error
}

var kafkaHTTP = &http.Client{Timeout: 30 * time.Second}

// startGateway starts `gateway serve args...` on a free loopback port and
// waits until it answers /healthz; it is killed when the test ends.
func startGateway(t *testing.T, bin, name string, args ...string) *gatewayProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	g := &gatewayProcess{name: name, url: "http://" + addr, out: &lockedBuffer{}, exited: make(chan struct{})}
	g.cmd = exec.Command(bin, append([]string{"serve", "--addr", addr, "--rollup-interval", "0"}, args...)...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.Env = os.Environ()
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.err = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.kill()
		if t.Failed() {
			t.Logf("output of gateway %s:\n%s", g.name, tail(g.out.String(), 60))
		}
	})
	waitUntil(t, 60*time.Second, "gateway "+name+" to answer /healthz", func() error {
		select {
		case <-g.exited:
			t.Fatalf("gateway %s exited: %v\n%s", name, g.err, g.out.String())
		default:
		}
		resp, err := kafkaHTTP.Get(g.url + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return g
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (g *gatewayProcess) kill() {
	select {
	case <-g.exited:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.exited
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// waitUntil calls check until it returns nil, failing the test after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("waited %v for %s: %v", limit, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metrics are a gateway's /metrics lines, by name with labels.
type metrics map[string]float64

func (g *gatewayProcess) metrics(t testing.TB) metrics {
	t.Helper()
	resp, err := kafkaHTTP.Get(g.url + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", g.name, err)
	}
	defer resp.Body.Close()
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// sum adds the values of every series of the metric name.
func (m metrics) sum(name string) float64 {
	total := 0.0
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			total += v
		}
	}
	return total
}

// kpoint is one point as produced.
type kpoint struct {
	series string
	t      int64
	v      float64
}

// pointSet is what a test produced: every point, by series and time.
type pointSet map[string]map[int64]float64

func (s pointSet) add(p kpoint) {
	if s[p.series] == nil {
		s[p.series] = map[int64]float64{}
	}
	s[p.series][p.t] = p.v
}

// makePoints returns perSeries points of each of the series, one every
// step from start on, with integer values (sums are exact in any order).
func makePoints(prefix string, series, perSeries int, start, step int64, seed uint64) []kpoint {
	r := rand.New(rand.NewPCG(seed, 7))
	var out []kpoint
	for s := range series {
		for i := range perSeries {
			out = append(out, kpoint{fmt.Sprintf("%s.s%d", prefix, s), start + int64(i)*step, float64(r.IntN(2001) - 1000)})
		}
	}
	return out
}

// records cuts points into records of at most n points of one series
// each, keyed by the series, alternating JSON and NDJSON bodies (the
// first with a content-type header, the second sniffed).
func records(topic string, pts []kpoint, n int) []*kgo.Record {
	var out []*kgo.Record
	for i := 0; i < len(pts); {
		j := i + 1
		for j < len(pts) && j-i < n && pts[j].series == pts[i].series {
			j++
		}
		rec := &kgo.Record{Topic: topic, Key: []byte(pts[i].series)}
		var b strings.Builder
		if len(out)%2 == 0 {
			rec.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}
			b.WriteString(`{"points":[`)
			for k, p := range pts[i:j] {
				if k > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"series":%q,"t":%d,"v":%g}`, p.series, p.t, p.v)
			}
			b.WriteString("]}")
		} else {
			for _, p := range pts[i:j] {
				fmt.Fprintf(&b, "{\"series\":%q,\"t\":%d,\"v\":%g}\n", p.series, p.t, p.v)
			}
		}
		rec.Value = []byte(b.String())
		out = append(out, rec)
		i = j
	}
	return out
}

// produce sends records and waits until the broker has them all.
func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// waitConsumed waits until group has committed every record of topic.
func waitConsumed(t testing.TB, adm *kadm.Client, topic, group string, limit time.Duration) time.Duration {
	t.Helper()
	return waitUntil(t, limit, "group "+group+" to commit every record of "+topic, func() error {
		ctx := testContext(t)
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		var behind []string
		ends.Each(func(o kadm.ListedOffset) {
			at := int64(0) // nothing committed: the partition is empty or nothing is written
			if c, ok := committed.Lookup(topic, o.Partition); ok {
				at = c.At
			}
			if at < o.Offset {
				behind = append(behind, fmt.Sprintf("partition %d at %d of %d", o.Partition, at, o.Offset))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("%s", strings.Join(behind, ", "))
		}
		return nil
	})
}

// getJSON reads a JSON answer of the gateway into v, wanting 200.
func getJSON(t testing.TB, u string, v any) {
	t.Helper()
	resp, err := kafkaHTTP.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %.300s", u, err, body)
	}
}

// seriesAnswer is the part of a read's answer the checks use.
type seriesAnswer struct {
	Points     [][]float64 `json:"points"`
	NextCursor string      `json:"next_cursor"`
	Segments   []struct {
		Tier string `json:"tier"`
	} `json:"segments"`
	Partial bool `json:"partial"`
}

// readSeries reads every page of a series' answer over [from, to) with
// the given parameters.
func readSeries(t testing.TB, g *gatewayProcess, series string, from, to int64, extra url.Values) ([][]float64, []string) {
	t.Helper()
	var points [][]float64
	var tiers []string
	cursor := ""
	for {
		q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}, "limit": {"10000"}}
		for k, v := range extra {
			q[k] = v
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var a seriesAnswer
		getJSON(t, g.url+"/v1/series/"+url.PathEscape(series)+"/points?"+q.Encode(), &a)
		if a.Partial {
			t.Fatalf("read of %s was partial", series)
		}
		points = append(points, a.Points...)
		for _, s := range a.Segments {
			tiers = append(tiers, s.Tier)
		}
		if a.NextCursor == "" {
			return points, tiers
		}
		cursor = a.NextCursor
	}
}

// checkRaw reads every series of want raw through g over [from, to),
// which holds all their points, and compares point for point.
func checkRaw(t testing.TB, g *gatewayProcess, want pointSet, from, to int64) {
	t.Helper()
	for series, pts := range want {
		got, _ := readSeries(t, g, series, from, to, url.Values{"resolution": {"raw"}})
		if len(got) != len(pts) {
			t.Errorf("%s: %d points read, %d produced", series, len(got), len(pts))
		}
		for _, p := range got {
			v, ok := pts[int64(p[0])]
			if !ok || v != p[1] {
				t.Errorf("%s: read t=%d v=%v, produced %v (present %v)", series, int64(p[0]), p[1], v, ok)
				break
			}
		}
	}
}

// runRollups runs every pending rollup through g.
func runRollups(t testing.TB, g *gatewayProcess) {
	t.Helper()
	resp, err := kafkaHTTP.Post(g.url+"/v1/admin/rollups/run", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("rollup run: %d %s", resp.StatusCode, body)
	}
}

// checkWindows reads the minute windows of every series of want over sp
// through g and compares min, max, sum and count with a brute-force
// computation over what was produced there. With rolledUp, every window
// must come from the minute tier: the rollup rows themselves are checked.
func checkWindows(t testing.TB, g *gatewayProcess, want pointSet, sp span, rolledUp bool) {
	t.Helper()
	from, to := sp.from, sp.to
	for series, all := range want {
		pts := map[int64]float64{}
		for ts, v := range all {
			if ts >= from && ts < to {
				pts[ts] = v
			}
		}
		type window struct{ min, max, sum, count float64 }
		brute := map[int64]*window{}
		for ts, v := range pts {
			w := tiers.AlignDown(ts, tiers.Minute)
			b := brute[w]
			if b == nil {
				b = &window{math.Inf(1), math.Inf(-1), 0, 0}
				brute[w] = b
			}
			b.min, b.max, b.sum, b.count = math.Min(b.min, v), math.Max(b.max, v), b.sum+v, b.count+1
		}
		got, used := readSeries(t, g, series, from, to, url.Values{"resolution": {"1m"}, "agg": {"min,max,sum,count"}})
		for _, tier := range used {
			if rolledUp && tier != "minute" {
				t.Fatalf("%s: minute windows served by the %s tier (%v): the rollups did not run", series, tier, used)
			}
		}
		if len(got) != len(brute) {
			t.Errorf("%s: %d minute windows, brute force has %d", series, len(got), len(brute))
		}
		for _, row := range got {
			b := brute[int64(row[0])]
			if b == nil || row[1] != b.min || row[2] != b.max || row[3] != b.sum || row[4] != b.count {
				t.Errorf("%s: window %d = %v, brute force %+v", series, int64(row[0]), row[1:], b)
				break
			}
		}
	}
}

// span is a range of point times [from, to).
type span struct{ from, to int64 }

// pointSpans are where a test's points lie, relative to the wall clock
// the gateway process keeps: late, the half hour that ends 20 minutes ago
// (older than the lateness on arrival: the late table; rolled up and
// served from the minute tier once the rollups run, being older than
// their watermark, the run less the lateness and the grace), and recent,
// the 9 minutes that end a minute ago (on time: the raw table; its minute
// windows are computed from raw until the watermark passes them).
func pointSpans() (late, recent span) {
	now := tiers.AlignDown(time.Now().UnixMilli(), tiers.Minute)
	return span{now - 50*tiers.Minute, now - 20*tiers.Minute}, span{now - 10*tiers.Minute, now - tiers.Minute}
}

// checkAll checks every point of want raw, then runs the rollups and
// checks the minute windows of both spans: the late span's from the
// minute tier.
func checkAll(t testing.TB, g *gatewayProcess, want pointSet, late, recent span) {
	t.Helper()
	checkRaw(t, g, want, late.from, recent.to)
	runRollups(t, g)
	checkWindows(t, g, want, late, true)
	checkWindows(t, g, want, recent, false)
}

// consumerFlags are the Kafka flags of a gateway in group group.
func consumerFlags(topic, group string, brokers []string, extra ...string) []string {
	return append([]string{"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", topic, "--kafka-group", group,
		"--kafka-session-timeout", "6s", "--kafka-retry-max", "1s"}, extra...)
}

// spanPoints are perSeries points of each of series series in each of the
// spans, one every span/perSeries.
func spanPoints(prefix string, series, perSeries int, seed uint64, spans ...span) []kpoint {
	var out []kpoint
	for i, sp := range spans {
		out = append(out, makePoints(prefix, series, perSeries, sp.from, (sp.to-sp.from)/int64(perSeries), seed+uint64(i))...)
	}
	return out
}

// TestKafkaKillDuringConsumption produces records while the consuming
// gateway is killed with SIGKILL three times and started again each
// time: afterwards every produced point reads back with its value, and
// the minute rollups equal a brute-force computation over what was
// produced (a record written again after a kill changes nothing).
func TestKafkaKillDuringConsumption(t *testing.T) {
	bin := buildGatewayBinary(t)
	cl, adm := kafkaAdmin(t)
	topic := newTopic(t, adm, 4)
	const group = "kill"
	_, store := kafkaKeyspace(t)
	args := append(store, consumerFlags(topic, group, kafkaBrokers(t))...)

	late, recent := pointSpans()
	pts := spanPoints("kafka.kill", 8, 2000, 1, late, recent)
	want := pointSet{}
	for _, p := range pts {
		want.add(p)
	}
	recs := records(topic, pts, 50)
	r := rand.New(rand.NewPCG(2, 2))
	r.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })

	g := startGateway(t, bin, "run 1", args...)
	// The records go out in 20 slices. Before slices 5, 10 and 15 the
	// test waits until the running gateway has written records, then
	// produces the slice and kills the gateway a few milliseconds later,
	// while it fetches and writes them, and starts another at once.
	const slices = 20
	run := 1
	for i := range slices {
		kill := i == 5 || i == 10 || i == 15
		if kill {
			waitUntil(t, time.Minute, "run "+strconv.Itoa(run)+" to write records", func() error {
				if n := g.metrics(t).sum("tsgate_kafka_records_total"); n == 0 {
					return fmt.Errorf("no record written yet")
				}
				return nil
			})
		}
		produce(t, cl, recs[i*len(recs)/slices:(i+1)*len(recs)/slices]...)
		if !kill {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		time.Sleep(time.Duration(5+r.IntN(60)) * time.Millisecond)
		n := g.metrics(t).sum("tsgate_kafka_records_total")
		g.kill()
		t.Logf("run %d killed after writing %v records", run, n)
		run++
		g = startGateway(t, bin, "run "+strconv.Itoa(run), args...)
	}
	d := waitConsumed(t, adm, topic, group, 3*time.Minute)
	t.Logf("%d records of %d points consumed %v after the last was produced; the last run wrote %v records",
		len(recs), len(pts), d.Round(time.Millisecond), g.metrics(t).sum("tsgate_kafka_records_total"))
	checkAll(t, g, want, late, recent)
	if m := g.metrics(t); m.sum("tsgate_kafka_dead_letters_total") != 0 {
		t.Errorf("dead letters: %v", m.sum("tsgate_kafka_dead_letters_total"))
	}
}

// TestKafkaGroupTakeover runs two gateways in one consumer group: the
// topic's four partitions are split between them and both write; when one
// is killed, the other takes its partitions over and writes what is
// produced afterwards; nothing is lost.
func TestKafkaGroupTakeover(t *testing.T) {
	bin := buildGatewayBinary(t)
	cl, adm := kafkaAdmin(t)
	topic := newTopic(t, adm, 4)
	const group = "pair"
	_, store := kafkaKeyspace(t)
	args := append(store, consumerFlags(topic, group, kafkaBrokers(t))...)
	assigned := func(g *gatewayProcess, n float64) func() error {
		return func() error {
			if got := g.metrics(t)["tsgate_kafka_assigned_partitions"]; got != n {
				return fmt.Errorf("%s has %v partitions, want %v", g.name, got, n)
			}
			return nil
		}
	}

	a := startGateway(t, bin, "a", args...)
	waitUntil(t, time.Minute, "a to own every partition", assigned(a, 4))
	b := startGateway(t, bin, "b", args...)
	waitUntil(t, time.Minute, "the partitions to be split", func() error {
		if err := assigned(a, 2)(); err != nil {
			return err
		}
		return assigned(b, 2)()
	})

	late, recent := pointSpans()
	want := pointSet{}
	first := spanPoints("kafka.pair", 8, 500, 3, late, recent)
	for _, p := range first {
		want.add(p)
	}
	produce(t, cl, records(topic, first, 40)...)
	waitConsumed(t, adm, topic, group, 2*time.Minute)
	ma, mb := a.metrics(t).sum("tsgate_kafka_records_total"), b.metrics(t).sum("tsgate_kafka_records_total")
	if ma == 0 || mb == 0 {
		t.Fatalf("records written: a %v, b %v; both should have written", ma, mb)
	}
	t.Logf("before the kill: a wrote %v records, b %v", ma, mb)

	a.kill()
	killed := time.Now()
	// Other times of the same series.
	second := spanPoints("kafka.pair", 8, 500, 5, span{late.from + 1, late.to}, span{recent.from + 1, recent.to})
	for _, p := range second {
		want.add(p)
	}
	produce(t, cl, records(topic, second, 40)...)
	waitUntil(t, time.Minute, "b to take every partition over", assigned(b, 4))
	t.Logf("b owns every partition %v after a's kill", time.Since(killed).Round(time.Millisecond))
	waitConsumed(t, adm, topic, group, 2*time.Minute)
	checkAll(t, b, want, late, recent)
}

// TestKafkaPoisonRecords sends records that can never be written among
// good ones: each lands in the dead-letter topic with its reason, the
// source's topic, partition and offset and its original bytes, and the
// good records before and after it are written.
func TestKafkaPoisonRecords(t *testing.T) {
	bin := buildGatewayBinary(t)
	cl, adm := kafkaAdmin(t)
	topic := newTopic(t, adm, 1)
	_, store := kafkaKeyspace(t)
	g := startGateway(t, bin, "g", append(store, consumerFlags(topic, "poison", kafkaBrokers(t))...)...)

	_, recent := pointSpans()
	from, to := recent.from, recent.to
	good1 := makePoints("kafka.poison.a", 1, 10, from, 1000, 5)
	good2 := makePoints("kafka.poison.b", 1, 10, from, 1000, 6)
	old := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	poison := []struct {
		rec    *kgo.Record
		kind   string
		reason string
		param  string
	}{
		{&kgo.Record{Value: []byte(`{"points":[{"series":"kafka.poison.c","t":` + strconv.FormatInt(from, 10) + `,"v":1},`)}, "invalid", "ends before the JSON is complete", "body"},
		{&kgo.Record{Value: []byte(`{"series":"kafka.poison.c","t":` + strconv.FormatInt(old, 10) + `,"v":1}`)}, "invalid", "older than the raw tier's retention", "points[0].t"},
		{&kgo.Record{Value: []byte("\x0a\x02\x0a\x00"), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/x-protobuf")}}}, "invalid", "not snappy-compressed", "body"},
		{&kgo.Record{Value: []byte("kafka.poison.c,1,1\n"), Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("text/csv")}}}, "media", "is not a point format", ""},
	}
	recs := records(topic, good1, 100)
	for _, p := range poison {
		p.rec.Topic = topic
		recs = append(recs, p.rec)
	}
	recs = append(recs, records(topic, good2, 100)...)
	produce(t, cl, recs...)
	waitConsumed(t, adm, topic, "poison", time.Minute)

	want := pointSet{}
	for _, p := range append(good1, good2...) {
		want.add(p)
	}
	checkRaw(t, g, want, from, to)
	var listed struct {
		Series []struct{ ID string } `json:"series"`
	}
	getJSON(t, g.url+"/v1/series?prefix=kafka.poison.c", &listed)
	if len(listed.Series) != 0 {
		t.Fatalf("a dead-lettered record created series: %+v", listed.Series)
	}

	// The dead letters, read from their topic.
	dl, err := kgo.NewClient(kgo.SeedBrokers(kafkaBrokers(t)...), kgo.ConsumeTopics(topic+".dead-letter"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	var got []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(poison) && ctx.Err() == nil {
		dl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	if len(got) != len(poison) {
		t.Fatalf("%d dead letters, want %d", len(got), len(poison))
	}
	for i, p := range poison {
		r := got[i]
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if !bytes.Equal(r.Value, p.rec.Value) || h["tsgate.dead-letter.topic"] != topic || h["tsgate.dead-letter.partition"] != "0" ||
			h["tsgate.dead-letter.offset"] != strconv.FormatInt(p.rec.Offset, 10) || h["tsgate.dead-letter.kind"] != p.kind ||
			!strings.Contains(h["tsgate.dead-letter.reason"], p.reason) || !strings.Contains(h["tsgate.dead-letter.errors"], p.param) {
			t.Errorf("dead letter %d: value %q, headers %v; want the record at offset %d, kind %s, reason with %q, errors naming %q",
				i, r.Value, h, p.rec.Offset, p.kind, p.reason, p.param)
		}
	}
	m := g.metrics(t)
	if m[`tsgate_kafka_dead_letters_total{kind="invalid"}`] != 3 || m[`tsgate_kafka_dead_letters_total{kind="media"}`] != 1 {
		t.Errorf("dead letters counted: %v invalid, %v media", m[`tsgate_kafka_dead_letters_total{kind="invalid"}`], m[`tsgate_kafka_dead_letters_total{kind="media"}`])
	}
	if m["tsgate_kafka_records_total"] != float64(len(recs)) || m["tsgate_kafka_points_total"] != 20 {
		t.Errorf("records %v of %d, points %v of 20", m["tsgate_kafka_records_total"], len(recs), m["tsgate_kafka_points_total"])
	}
}

// storeProxy is a Toxiproxy proxy, in the test process, between a gateway
// and the Cassandra node: cutting it is the node going down, as the
// gateway sees it, without stopping the node other tests share.
func storeProxy(t *testing.T, node string) *toxiproxy.Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.1.1:0") // an address of its own: the driver tells nodes apart by IP
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "cassandra", addr, node)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// paddedRecords are records of n points each whose JSON is padded with
// blanks to about size bytes: many bytes wait in Kafka while few points
// wait to be written.
func paddedRecords(topic string, pts []kpoint, n, size int) []*kgo.Record {
	recs := records(topic, pts, n)
	for _, r := range recs {
		if pad := size - len(r.Value); pad > 0 {
			if r.Value[0] == '{' && len(r.Headers) > 0 { // JSON: blanks after the opening brace
				r.Value = append(append([]byte("{"), bytes.Repeat([]byte(" "), pad)...), r.Value[1:]...)
			} else { // NDJSON: blank lines
				r.Value = append(r.Value, bytes.Repeat([]byte("\n"), pad)...)
			}
		}
	}
	return recs
}

// TestKafkaStoreOutage puts a proxy between the gateway and Cassandra.
// While the store is slow, the gateway keeps consuming and stays ready.
// While it is cut off, consumption pauses: nothing is committed, the
// partitions' fetching is paused, the records fetched stay within
// --kafka-queue-bytes and the process's memory stays flat while 120 MB of
// records wait in Kafka; nothing goes to the dead-letter topic. Once the
// proxy is back, consumption resumes and every point reads back.
func TestKafkaStoreOutage(t *testing.T) {
	bin := buildGatewayBinary(t)
	cl, adm := kafkaAdmin(t)
	topic := newTopic(t, adm, 4)
	const group = "outage"
	cfg, _ := kafkaKeyspace(t)
	px := storeProxy(t, cfg.Hosts[0])
	const queueBytes, fetchBytes = 8 << 20, 2 << 20
	args := append([]string{"--store", "cassandra", "--cassandra-hosts", px.Listen, "--cassandra-address-map", cfg.Hosts[0] + "=" + px.Listen,
		"--keyspace", cfg.Keyspace, "--cassandra-consistency", cfg.Consistency, "--cassandra-local-dc", cfg.LocalDC,
		"--cassandra-reconnect-interval", "500ms", "--cassandra-timeout", "3s"},
		consumerFlags(topic, group, kafkaBrokers(t), "--kafka-queue-bytes", strconv.Itoa(queueBytes), "--kafka-fetch-max-bytes", strconv.Itoa(fetchBytes))...)
	g := startGateway(t, bin, "g", args...)
	ready := func() int {
		resp, err := kafkaHTTP.Get(g.url + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitUntil(t, time.Minute, "the gateway to be ready", func() error {
		if s := ready(); s != 200 {
			return fmt.Errorf("/readyz %d", s)
		}
		return nil
	})

	late, recent := pointSpans()
	want := pointSet{}
	add := func(pts []kpoint) []kpoint {
		for _, p := range pts {
			want.add(p)
		}
		return pts
	}

	// Slow: 100 ms more each way on every round trip to the node.
	for _, stream := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"slow-%s","type":"latency","stream":%q,"attributes":{"latency":100}}`, stream, stream)
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatal(err)
		}
	}
	slow := records(topic, add(spanPoints("kafka.outage", 4, 100, 7, late, recent)), 10)
	produce(t, cl, slow...)
	slowStart := time.Now()
	for range 5 {
		if s := ready(); s != 200 {
			t.Fatalf("/readyz answered %d while the store was slow", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitConsumed(t, adm, topic, group, 2*time.Minute)
	t.Logf("%d records written through +100 ms each way in %v, /readyz 200 meanwhile", len(slow), time.Since(slowStart).Round(time.Millisecond))
	for _, stream := range []string{"upstream", "downstream"} {
		if err := px.Toxics.RemoveToxic(context.Background(), "slow-"+stream); err != nil {
			t.Fatal(err)
		}
	}
	base := g.metrics(t)
	rss0 := base["process_resident_memory_bytes"]

	// Down: the proxy refuses and drops every connection.
	px.Stop()
	cut := time.Now()
	backlog := paddedRecords(topic, add(spanPoints("kafka.outage", 4, 300, 9, span{late.from + 1, late.to}, span{recent.from + 1, recent.to})), 2, 100_000)
	// Sent uncompressed: --kafka-fetch-max-bytes bounds the bytes of a
	// fetch as they travel, and blanks compress a hundredfold.
	raw, err := kgo.NewClient(kgo.SeedBrokers(kafkaBrokers(t)...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	produce(t, raw, backlog...)
	t.Logf("%d records (%.0f MB) produced while the store is cut off", len(backlog), float64(len(backlog)*100_000)/1e6)
	var maxRSS, maxQueued, maxLag float64
	paused := false
	committedAtCut := committedTotal(t, adm, topic, group)
	watch := func(m metrics) {
		maxRSS = max(maxRSS, m["process_resident_memory_bytes"])
		maxQueued = max(maxQueued, m["tsgate_kafka_queued_bytes"])
		maxLag = max(maxLag, m.sum("tsgate_kafka_consumer_lag"))
		paused = paused || m["tsgate_kafka_paused_partitions"] > 0
	}
	for time.Since(cut) < 15*time.Second {
		watch(g.metrics(t))
		time.Sleep(250 * time.Millisecond)
	}
	down := g.metrics(t)
	watch(down)
	if c := committedTotal(t, adm, topic, group); c != committedAtCut {
		t.Errorf("offsets committed while the store was cut off: %d, %d before", c, committedAtCut)
	}
	if !paused || down.sum(`tsgate_kafka_write_retries_total{cause="store"}`) == 0 {
		t.Errorf("with the store cut off: paused partitions seen %v, store retries %v", paused, down.sum(`tsgate_kafka_write_retries_total{cause="store"}`))
	}
	if maxLag < float64(len(backlog))/2 {
		t.Errorf("largest lag %v with %d records waiting", maxLag, len(backlog))
	}
	if d := down["tsgate_kafka_records_total"] - base["tsgate_kafka_records_total"]; d > 0 {
		t.Errorf("%v records counted written while the store was cut off", d)
	}

	downRSS := maxRSS
	t.Logf("while cut off: RSS %.0f MiB before, at most %.0f MiB; queued at most %.1f MiB (bound %d MiB); lag at most %v",
		rss0/(1<<20), downRSS/(1<<20), maxQueued/(1<<20), queueBytes>>20, maxLag)
	if growth := downRSS - rss0; growth > 32<<20 {
		t.Errorf("RSS grew by %.0f MiB while 120 MB of records waited", growth/(1<<20))
	}

	// Back: consumption resumes where it stopped.
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Duration)
	go func() { done <- waitConsumed(t, adm, topic, group, 3*time.Minute) }()
	var d time.Duration
	for d == 0 {
		select {
		case d = <-done:
		case <-time.After(250 * time.Millisecond):
			watch(g.metrics(t))
		}
	}
	t.Logf("the backlog was written %v after the store came back; RSS at most %.0f MiB meanwhile, queued at most %.1f MiB",
		d.Round(time.Millisecond), maxRSS/(1<<20), maxQueued/(1<<20))
	if maxQueued > queueBytes+2*fetchBytes {
		t.Errorf("queued %.0f bytes, more than --kafka-queue-bytes %d and a fetch", maxQueued, queueBytes)
	}
	checkAll(t, g, want, late, recent)
	if m := g.metrics(t); m.sum("tsgate_kafka_dead_letters_total") != 0 {
		t.Errorf("dead letters: %v", m.sum("tsgate_kafka_dead_letters_total"))
	}
}

// committedTotal adds the group's committed offsets of topic.
func committedTotal(t testing.TB, adm *kadm.Client, topic, group string) int64 {
	t.Helper()
	offs, err := adm.FetchOffsets(testContext(t), group)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			total += o.At
		}
	})
	return total
}
