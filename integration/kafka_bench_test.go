//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/tiers"
)

var (
	benchLatencySamples = flag.Int("bench.kafka-latency-samples", 300, "BenchmarkKafkaIngest: records whose produce-to-readable time is measured")
	benchKafkaBatch     = flag.Int("bench.kafka-batch-points", 0, "BenchmarkKafkaIngest: --kafka-batch-points of the consumer (0: the default)")
)

// BenchmarkKafkaIngest compares the points per second a gateway writes
// from a Kafka topic with the points per second it takes through
// POST /v1/points, on the same node, and measures the time from producing
// one record to its point being readable through the API.
//
// One gateway is assembled over the Cassandra store as `gateway serve`
// assembles it, consuming a topic of four partitions in a group and
// serving the API over a real HTTP server. Each round writes the points
// of BenchmarkIngest on each side, in series of their own: 4 clients × 20
// batches of 5,000 points (JSON bodies encoded before timing).
//
//   - http: each client posts its batches one after another, as
//     BenchmarkIngest does; timed until the last answer.
//   - kafka: each client's batches are the records of one partition,
//     produced at once (the bodies as record values, content-type
//     application/json); timed from the first produce until the consumer
//     has written every record's points (tsgate_kafka_records_total).
//
// Then, with the consumer idle, one record of one point at a time is
// produced and the point read back through GET /v1/series/{id}/points
// until it is there: the produce-to-readable latency, p50 and p99.
func BenchmarkKafkaIngest(b *testing.B) {
	p := tiers.DefaultPyramid()
	store, cfg := openBenchStore(b, p)
	_, adm := kafkaAdmin(b)
	topic := newTopic(b, adm, ingestClients)

	clock := &benchClock{}
	gc := gateway.DefaultConfig()
	gc.Pyramid, gc.CacheBytes, gc.Rollup.Interval = p, 0, 0
	gc.CursorKey = base64.StdEncoding.EncodeToString([]byte("benchmark cursor key, 32 bytes.."))
	gc.Kafka.Brokers, gc.Kafka.Topic, gc.Kafka.Group = kafkaBrokers(b), topic, "bench"
	if *benchKafkaBatch > 0 {
		gc.Kafka.BatchPoints = *benchKafkaBatch
	}
	g, err := gateway.New(context.Background(), store, gc, gateway.Options{Now: clock.Now, Logger: storeLogger()})
	if err != nil {
		b.Fatal(err)
	}
	reg := g.Registry
	ctx, stop := context.WithCancel(context.Background())
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- g.Kafka.Run(ctx) }()
	b.Cleanup(func() {
		stop()
		if err := <-consumerDone; err != nil {
			b.Error(err)
		}
	})
	ts := httptest.NewServer(g.Handler())
	b.Cleanup(ts.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ingestClients}}
	b.Cleanup(client.CloseIdleConnections)
	// counter is the sum of the gateway's counter name.
	counter := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		total := 0.0
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					total += m.GetCounter().GetValue()
				}
				return total
			}
		}
		b.Fatalf("no %s", name)
		return 0
	}
	written := func() float64 { return counter("tsgate_kafka_records_total") }

	// batches are one client's JSON bodies of a round: recent,
	// consecutive points of its own series.
	batches := func(series string, now int64) [][]byte {
		var out [][]byte
		t := now - 9*tiers.Minute
		for range ingestBatches {
			pts := make([]point, ingestBatchSize)
			for j := range pts {
				pts[j] = point{t, float64(t / 10 % 977)}
				t += ingestInterval.Milliseconds()
			}
			out = append(out, jsonBody(series, pts))
		}
		return out
	}
	total := ingestClients * ingestBatches * ingestBatchSize
	cpu := cpuMeter{}
	viaHTTP := func(round int) time.Duration {
		now := time.Now().UnixMilli()
		bodies := make([][][]byte, ingestClients)
		for c := range bodies {
			bodies[c] = batches(fmt.Sprintf("bench.kafka.r%d.http.c%d", round, c), now)
		}
		return cpu.time("http", func() {
			var eg errgroup.Group
			for c := range bodies {
				eg.Go(func() error {
					for _, body := range bodies[c] {
						if err := post(client, ts.URL+"/v1/points", "application/json", body); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := eg.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
	// Uncompressed, as the HTTP side's bodies are.
	producer, err := kgo.NewClient(kgo.SeedBrokers(kafkaBrokers(b)...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(producer.Close)
	viaKafka := func(round int) time.Duration {
		now := time.Now().UnixMilli()
		var recs []*kgo.Record
		for c := range ingestClients {
			for _, body := range batches(fmt.Sprintf("bench.kafka.r%d.kafka.c%d", round, c), now) {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(c), Value: body,
					Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}})
			}
		}
		before := written()
		return cpu.time("kafka", func() {
			for _, r := range recs {
				producer.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Errorf("produce: %v", err)
					}
				})
			}
			// Gathering the registry costs CPU the gateway would use:
			// every 20 ms is often enough for runs of seconds.
			for written() < before+float64(len(recs)) {
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	broker := map[string]time.Duration{}
	runs := map[string]int{}
	run := func(round int, side string) time.Duration {
		b0 := brokerCPU()
		defer func() {
			if round >= 0 && b0 >= 0 {
				broker[side] += brokerCPU() - b0
				runs[side]++
			}
		}()
		if side == "http" {
			return viaHTTP(round)
		}
		return viaKafka(round)
	}
	sides := []string{"http", "kafka"}
	// A warm-up round: connections, prepared statements, the group's
	// assignment, JIT on the node and the broker.
	run(-1, "http")
	run(-1, "kafka")
	var res map[string][]time.Duration
	clear(cpu)
	for b.Loop() {
		res = rounds(b, *benchRounds, sides, run)
	}
	cpu.log(b, sides)
	for _, side := range sides {
		if runs[side] > 0 {
			note(b, "%s: CPU of the Kafka broker per run %.3fs", side, (broker[side] / time.Duration(runs[side])).Seconds())
		}
	}
	note(b, "Kafka side: %v write retries, %v dead letters", counter("tsgate_kafka_write_retries_total"), counter("tsgate_kafka_dead_letters_total"))
	for _, side := range sides {
		name := fmt.Sprintf("bench.kafka.r%d.%s.c%d", *benchRounds-1, side, ingestClients-1)
		if got := countRaw(b, newSession(b), cfg.Keyspace, name, p.Raw().DefaultLayout()); got != ingestBatches*ingestBatchSize {
			b.Fatalf("%s: series %s holds %d points, want %d", side, name, got, ingestBatches*ingestBatchSize)
		}
	}
	h, k := median(res["http"]), median(res["kafka"])
	b.ReportMetric(float64(total)/h.Seconds(), "http-points/s")
	b.ReportMetric(float64(total)/k.Seconds(), "kafka-points/s")
	b.ReportMetric(float64(h)/float64(k), "kafka/http-x")
	note(b, "medians over %d rounds of %d points per side: POST /v1/points %s (%.0f points/s), Kafka %s (%.0f points/s): %.2fx",
		*benchRounds, total, h.Round(time.Millisecond), float64(total)/h.Seconds(), k.Round(time.Millisecond), float64(total)/k.Seconds(), float64(h)/float64(k))

	// Produce to readable, one record at a time.
	const series = "bench.kafka.latency"
	var lat []time.Duration
	base := time.Now().UnixMilli() - tiers.Minute
	for i := range *benchLatencySamples {
		t := base + int64(i)
		rec := &kgo.Record{Topic: topic, Partition: int32(i % ingestClients),
			Value: []byte(fmt.Sprintf(`{"series":%q,"t":%d,"v":%d}`, series, t, i))}
		q := url.Values{"from": {strconv.FormatInt(t, 10)}, "to": {strconv.FormatInt(t+1, 10)}, "resolution": {"raw"}}
		u := ts.URL + "/v1/series/" + series + "/points?" + q.Encode()
		start := time.Now()
		if err := producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := pointsAt(client, u)
			if err != nil {
				b.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("record %d not readable after a minute", i)
			}
			time.Sleep(500 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(10 * time.Millisecond)
	}
	slices.Sort(lat)
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "e2e-p50-ms")
	b.ReportMetric(ms(p99), "e2e-p99-ms")
	note(b, "produce to readable over %d records of one point: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		len(lat), ms(p50), ms(p99), ms(lat[len(lat)-1]))
}

// pointsAt is the number of points of a read's first page; 0 for a
// series not created yet.
func pointsAt(c *http.Client, u string) (int, error) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", u, resp.StatusCode)
	}
	var a seriesAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return 0, err
	}
	return len(a.Points), nil
}

// brokerCPU is the CPU time the Kafka broker started by scripts/kafka.sh
// on this machine has used so far; -1 when there is none.
func brokerCPU() time.Duration {
	pid, err := os.ReadFile(filepath.Join("..", ".kafka", "kafka.pid"))
	if err != nil {
		return -1
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat"))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
