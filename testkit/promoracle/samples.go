package promoracle

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
)

// Sample is one sample: a time in Unix milliseconds and a value.
type Sample struct {
	T int64
	V float64
}

// Labels are a series' labels, the metric name under __name__.
type Labels map[string]string

// Names returns the label names, sorted.
func (l Labels) Names() []string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// String is the label set as PromQL writes it, names sorted, values
// quoted: {__name__="x", a="1"}. Equal label sets have equal strings.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range l.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[n]))
	}
	b.WriteByte('}')
	return b.String()
}

// Proto returns the labels as remote write carries them: sorted by name.
func (l Labels) Proto() []prompb.Label {
	out := make([]prompb.Label, 0, len(l))
	for _, n := range l.Names() {
		out = append(out, prompb.Label{Name: n, Value: l[n]})
	}
	return out
}

// SeriesID is the id the gateway gives the series of these labels when
// they arrive by remote write: the metric name, a dot, and the first 16
// lowercase hex digits of the SHA-256 of the canonical text
// name{a="1",b="2"} (the other labels sorted by name, each value a Go
// double-quoted string).
func (l Labels) SeriesID() string {
	var b strings.Builder
	b.WriteString(l["__name__"])
	b.WriteByte('{')
	first := true
	for _, n := range l.Names() {
		if n == "__name__" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l[n]))
	}
	b.WriteByte('}')
	return l["__name__"] + "." + sha256Hex16(b.String())
}

// Series is one series of the sample set, its samples ascending.
type Series struct {
	Labels  Labels
	Samples []Sample
}

// Set is the oracle's deterministic sample set: what both servers are
// given, and the times the expressions are evaluated at.
//
// The samples are what a Prometheus server scraping five targets of two
// jobs every 15 s would have: counters (integer and float) with resets at
// process restarts, gauges, a classic histogram, an info metric with
// awkward label values, a recording-rule-style name, a target that starts
// late, one with a 12-minute gap, one that goes away (its series end with
// stale markers), a series that appears mid-way. Every sample lies off
// the whole second: the targets' scrape offsets (3.7 s and the like) and
// jitter never land on a multiple of 1000 ms, while every evaluation
// time, range and step of the expressions is a whole number of seconds.
// So no sample sits on the boundary of a range selector or of the
// lookback window, where Prometheus 2.x (closed left bound) and 3.x (open
// left bound) differ.
//
// What happens when, after Base (messages name times as Base+offset):
// api/10.0.0.3:8080 is first scraped at 40m; api/10.0.0.1:8080 restarts
// at 60m and 150m, web/10.0.1.1:80 at 100m; the counter of POST 500 of
// 10.0.1.1 first appears at 70m; api/10.0.0.2:8080 has no scrape in
// [95m, 107m); web/10.0.1.2:80 goes away at 130m, its series ending with
// stale markers at the scrape that did not happen.
type Set struct {
	// Now is the instant the set was placed by.
	Now time.Time
	// Base is the start of the scrape schedule, Span before End.
	Base time.Time
	// End is Now truncated to the minute: the last evaluation time;
	// every sample is before it.
	End    time.Time
	Series []Series
}

// Span is how much history the set holds.
const Span = 3 * time.Hour

// ScrapeInterval is the targets' scrape interval.
const ScrapeInterval = 15 * time.Second

// target is one scraped process: its labels, where in the schedule it
// scrapes from and to, its gaps and restarts, its scrape offset.
type target struct {
	job, instance string
	offset        time.Duration // from the interval's start
	from, to      time.Duration // relative to Base; to 0 means until End
	stale         bool          // at "to", its series get stale markers
	gapFrom       time.Duration // no scrapes in [gapFrom, gapTo)
	gapTo         time.Duration
	restarts      []time.Duration // counters start again from zero
	version       string
	branch        string
}

var targets = []target{
	{job: "api", instance: "10.0.0.1:8080", offset: 3700 * time.Millisecond, restarts: []time.Duration{60 * time.Minute, 150 * time.Minute},
		version: "1.4.2", branch: "main"},
	{job: "api", instance: "10.0.0.2:8080", offset: 6017 * time.Millisecond, gapFrom: 95 * time.Minute, gapTo: 107 * time.Minute,
		version: "1.4.2", branch: "main"},
	{job: "api", instance: "10.0.0.3:8080", offset: 8331 * time.Millisecond, from: 40 * time.Minute,
		version: "1.5.0-rc.1", branch: `release/"1.5" \ ✓`},
	{job: "web", instance: "10.0.1.1:80", offset: 10649 * time.Millisecond, restarts: []time.Duration{100 * time.Minute},
		version: "2.0.0", branch: "main"},
	{job: "web", instance: "10.0.1.2:80", offset: 12963 * time.Millisecond, to: 130 * time.Minute, stale: true,
		version: "2.0.0", branch: "a=b,c"},
}

// histogramBuckets are the upper bounds of the classic histogram.
var histogramBuckets = []string{"0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"}

// NewSet builds the sample set for the instant now: the schedule starts
// Span before now truncated to the minute. Equal instants give equal sets.
func NewSet(now time.Time) *Set {
	end := now.Truncate(time.Minute)
	base := end.Add(-Span)
	s := &Set{Now: now, Base: base, End: end}
	series := map[string]*Series{}
	var order []string
	add := func(l Labels, smp Sample) {
		k := l.String()
		sr, ok := series[k]
		if !ok {
			sr = &Series{Labels: l}
			series[k] = sr
			order = append(order, k)
		}
		sr.Samples = append(sr.Samples, smp)
	}
	for ti, tg := range targets {
		r := rand.New(rand.NewPCG(uint64(ti+1), 0x04ac1e))
		st := newTargetState(tg, r)
		var last int64
		var lastKeys []Labels
		for k := 0; ; k++ {
			at := time.Duration(k)*ScrapeInterval + tg.offset
			if at >= Span {
				break
			}
			// Jitter of up to half a second either way; never a whole second.
			ms := base.Add(at).UnixMilli() + int64(r.IntN(1001)) - 500
			if ms%1000 == 0 {
				ms += 7
			}
			rel := time.Duration(ms-base.UnixMilli()) * time.Millisecond
			if rel < tg.from || (tg.to > 0 && rel >= tg.to) || (rel >= tg.gapFrom && rel < tg.gapTo) {
				if tg.stale && tg.to > 0 && rel >= tg.to && lastKeys != nil {
					// The first missed scrape: Prometheus marks every
					// series of the target stale.
					for _, l := range lastKeys {
						add(l, Sample{T: ms, V: math.Float64frombits(value.StaleNaN)})
					}
					lastKeys = nil
				}
				continue
			}
			if ms <= last {
				ms = last + 1
				if ms%1000 == 0 {
					ms++
				}
			}
			last = ms
			lastKeys = lastKeys[:0]
			for _, m := range st.scrape(rel, r) {
				add(m.labels, Sample{T: ms, V: m.v})
				lastKeys = append(lastKeys, m.labels)
			}
		}
	}
	for _, k := range order {
		s.Series = append(s.Series, *series[k])
	}
	slices.SortFunc(s.Series, func(a, b Series) int { return cmp.Compare(a.Labels.String(), b.Labels.String()) })
	return s
}

// metricValue is one series' value at a scrape.
type metricValue struct {
	labels Labels
	v      float64
}

// targetState is what a target's process counts between scrapes.
type targetState struct {
	tg        target
	restarted int
	requests  map[[2]string]float64
	cpu       map[string]float64
	buckets   []float64
	hSum      float64
	hCount    float64
	memory    float64
}

// newTargetState is a process that has been running for long before
// its first scrape: its counters are well away from zero. (A counter
// whose first sample is small compared with its increase lets rate()
// extrapolate to its zero point, which Prometheus 2.x and 3.x do in
// different order at a series' start: the set keeps off that difference.)
func newTargetState(tg target, r *rand.Rand) *targetState {
	st := &targetState{tg: tg}
	st.reset()
	for _, mc := range [][2]string{{"GET", "200"}, {"GET", "500"}, {"POST", "200"}} {
		st.requests[mc] = float64(1000 * (50 + r.IntN(450)))
	}
	for _, mode := range []string{"user", "system"} {
		st.cpu[mode] = 1e4 * (1 + r.Float64())
	}
	n := float64(40000 + r.IntN(20000))
	for i, f := range []float64{0.3, 0.5, 0.7, 0.85, 0.95, 0.99, 1} {
		st.buckets[i] = math.Round(f * n)
	}
	st.hCount, st.hSum = n, n*0.19
	return st
}

// reset is a process restart: the counters start from zero.
func (st *targetState) reset() {
	st.requests = map[[2]string]float64{}
	st.cpu = map[string]float64{}
	st.buckets = make([]float64, len(histogramBuckets))
	st.hSum, st.hCount = 0, 0
	st.memory = 3e8
}

func (st *targetState) labels(name string, kv ...string) Labels {
	l := Labels{"__name__": name, "job": st.tg.job, "instance": st.tg.instance}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

// scrape advances the process to rel (from Base) and returns what a
// scrape of it reads.
func (st *targetState) scrape(rel time.Duration, r *rand.Rand) []metricValue {
	for st.restarted < len(st.tg.restarts) && rel >= st.tg.restarts[st.restarted] {
		st.reset()
		st.restarted++
	}
	var out []metricValue
	minutes := rel.Minutes()

	// Integer counters. POST 500 of 10.0.1.1 is first counted (and its
	// series first exported) 70 minutes in.
	for _, mc := range [][2]string{{"GET", "200"}, {"GET", "500"}, {"POST", "200"}, {"POST", "500"}} {
		var inc int
		switch mc {
		case [2]string{"GET", "200"}:
			inc = 20 + r.IntN(41)
		case [2]string{"POST", "200"}:
			inc = 5 + r.IntN(11)
		case [2]string{"GET", "500"}:
			inc = r.IntN(3)
		default:
			if r.IntN(4) == 0 {
				inc = 1
			}
		}
		if mc == [2]string{"POST", "500"} && st.tg.instance == "10.0.1.1:80" && rel < 70*time.Minute {
			continue
		}
		st.requests[mc] += float64(inc)
		out = append(out, metricValue{st.labels("oracle_http_requests_total", "method", mc[0], "code", mc[1]), st.requests[mc]})
	}

	// Float counters.
	for _, mode := range []string{"user", "system"} {
		st.cpu[mode] += 15 * (0.1 + 0.8*r.Float64())
		out = append(out, metricValue{st.labels("oracle_cpu_seconds_total", "mode", mode), st.cpu[mode]})
	}

	// Gauges: a temperature that swings through negative values on one
	// sensor, a small integer queue length that is often zero, a memory
	// footprint in the hundreds of millions that grows and falls back at
	// a restart.
	phase := float64(len(st.tg.instance))
	out = append(out,
		metricValue{st.labels("oracle_temperature_celsius", "sensor", "cpu"), 55 + 12*math.Sin(2*math.Pi*minutes/47+phase) + r.Float64() - 0.5},
		metricValue{st.labels("oracle_temperature_celsius", "sensor", "board"), 4*math.Sin(2*math.Pi*minutes/71+phase) - 1 + (r.Float64()-0.5)/4},
		metricValue{st.labels("oracle_queue_length"), float64(max(0, r.IntN(12)-4))},
	)
	st.memory += float64(r.IntN(200000)) - 40000
	out = append(out, metricValue{st.labels("oracle_memory_bytes"), st.memory})

	out = append(out, metricValue{st.labels("oracle_build_info", "version", st.tg.version, "branch", st.tg.branch), 1})

	// A classic histogram of request durations, on the api job.
	if st.tg.job == "api" {
		n := 10 + r.IntN(31)
		for range n {
			d := math.Exp(r.NormFloat64() - 2)
			st.hSum += d
			st.hCount++
			for i, le := range histogramBuckets {
				bound, _ := strconv.ParseFloat(le, 64)
				if d <= bound {
					st.buckets[i]++
				}
			}
		}
		for i, le := range histogramBuckets {
			out = append(out, metricValue{st.labels("oracle_request_duration_seconds_bucket", "le", le), st.buckets[i]})
		}
		out = append(out,
			metricValue{st.labels("oracle_request_duration_seconds_sum"), st.hSum},
			metricValue{st.labels("oracle_request_duration_seconds_count"), st.hCount})
	}

	// A recording-rule-style name, with a colon.
	if st.tg.instance == "10.0.0.1:8080" || st.tg.instance == "10.0.1.1:80" {
		l := Labels{"__name__": "oracle:queue_length:max5m", "job": st.tg.job}
		out = append(out, metricValue{l, float64(r.IntN(9))})
	}
	return out
}

// Samples counts the samples of the set.
func (s *Set) Samples() int {
	n := 0
	for _, sr := range s.Series {
		n += len(sr.Samples)
	}
	return n
}

// WriteRequests cuts the set into remote-write requests of consecutive
// slices of time, each holding every series' samples of its slice: sent
// in order, no server meets a sample older than one it already has, as
// with a Prometheus server's own remote write.
func (s *Set) WriteRequests(slice time.Duration) []*prompb.WriteRequest {
	var out []*prompb.WriteRequest
	next := make([]int, len(s.Series))
	for from := s.Base.Add(-slice); from.Before(s.Now.Add(slice)); from = from.Add(slice) {
		to := from.Add(slice).UnixMilli()
		req := &prompb.WriteRequest{}
		for i, sr := range s.Series {
			var samples []prompb.Sample
			for next[i] < len(sr.Samples) && sr.Samples[next[i]].T < to {
				smp := sr.Samples[next[i]]
				samples = append(samples, prompb.Sample{Timestamp: smp.T, Value: smp.V})
				next[i]++
			}
			if len(samples) > 0 {
				req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: sr.Labels.Proto(), Samples: samples})
			}
		}
		if len(req.Timeseries) > 0 {
			out = append(out, req)
		}
	}
	return out
}

// Metric returns the series of the metric name, in label order.
func (s *Set) Metric(name string) []Series {
	var out []Series
	for _, sr := range s.Series {
		if sr.Labels["__name__"] == name {
			out = append(out, sr)
		}
	}
	return out
}

// At is the instant Base + d, for the expressions.
func (s *Set) At(d time.Duration) time.Time { return s.Base.Add(d) }

// unix formats an instant as PromQL's @ and the API take it: Unix seconds.
func unix(t time.Time) string {
	if t.Nanosecond() == 0 {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// sha256Hex16 is the first 16 lowercase hex digits of the SHA-256 of s.
func sha256Hex16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
