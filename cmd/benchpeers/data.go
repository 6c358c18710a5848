package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// interval is the data set's sampling interval, and offset where in each
// interval a point lies: halfway, so that no point is ever on a window
// boundary (every panel step is a multiple of the interval). Then the
// gateway's windows [t, t+step) and PromQL's (T-step, T] hold the same
// points exactly when T = t + step.
const (
	interval = 10 * time.Second
	offset   = 5 * time.Second
	metric   = "bench_gauge"
)

// dataset is the generated data: n series of one gauge, one point every
// interval from start (inclusive) to end (exclusive), each at offset
// within its interval.
type dataset struct {
	series int
	start  time.Time
	end    time.Time
	seed   uint64
}

// host is the host label of series i.
func host(i int) string { return fmt.Sprintf("host-%02d", i) }

// dc is the dc label of series i.
func dc(i int) string {
	if i%2 == 0 {
		return "eu"
	}
	return "us"
}

// seriesID is the gateway's id of series i.
func seriesID(i int) string { return metric + "." + host(i) }

// points is how many points each series has.
func (d dataset) points() int { return int(d.end.Sub(d.start) / interval) }

// total is the number of points of the data set.
func (d dataset) total() int64 { return int64(d.points()) * int64(d.series) }

// ts is the Unix milliseconds of point k of a series; k may go beyond
// points() (the points the refreshing dashboard writes).
func (d dataset) ts(k int) int64 {
	return d.start.Add(time.Duration(k)*interval + offset).UnixMilli()
}

// index is the point index of the first point at or after ms.
func (d dataset) index(ms int64) int {
	rel := ms - d.start.UnixMilli() - offset.Milliseconds()
	step := interval.Milliseconds()
	if rel <= 0 {
		return int(-((-rel) / step))
	}
	return int((rel + step - 1) / step)
}

// gauge generates series i's values from point index k on: a level of its
// own, a daily cycle, a slow random walk and noise, rounded to 3 decimals
// as a sensor reports them. Values depend only on the seed, the series and
// the index, so every run and every side gets the same ones.
type gauge struct {
	level, amp, phase, walk float64
	rng                     *rand.Rand
	k                       int
}

func (d dataset) gauge(i int) *gauge {
	r := rand.New(rand.NewPCG(d.seed, uint64(i)+1))
	return &gauge{
		level: 20 + 60*r.Float64(),
		amp:   2 + 10*r.Float64(),
		phase: 2 * math.Pi * r.Float64(),
		rng:   r,
	}
}

// next returns the value of point k and moves on to k+1.
func (g *gauge) next() float64 {
	day := float64(24 * time.Hour / interval)
	g.walk += 0.02 * g.rng.NormFloat64()
	g.walk *= 0.9995
	v := g.level + g.amp*math.Sin(2*math.Pi*float64(g.k)/day+g.phase) + g.walk + 0.3*g.rng.NormFloat64()
	g.k++
	return math.Round(v*1000) / 1000
}

// values returns the values of series i at indexes [0, n).
func (d dataset) values(i, n int) []float64 {
	g := d.gauge(i)
	out := make([]float64, n)
	for k := range out {
		out[k] = g.next()
	}
	return out
}

// inputs are the data set written the way each side's users load data.
type inputs struct {
	ndjson      string // gateway import: label lines, then {"series","t","v"} lines
	vmJSON      string // VictoriaMetrics /api/v1/import: JSON lines of metric, values, timestamps
	openMetrics string // promtool tsdb create-blocks-from openmetrics
}

// write writes the three input files into dir, series after series, each
// in time order (as an export of one system taken to another is).
func (d dataset) write(dir string) (inputs, error) {
	in := inputs{ndjson: dir + "/gateway.ndjson", vmJSON: dir + "/victoria.jsonl", openMetrics: dir + "/prometheus.om"}
	files := map[string]*os.File{}
	bufs := map[string]*bufio.Writer{}
	for _, p := range []string{in.ndjson, in.vmJSON, in.openMetrics} {
		f, err := os.Create(p)
		if err != nil {
			return in, err
		}
		defer func() { _ = f.Close() }()
		files[p] = f
		bufs[p] = bufio.NewWriterSize(f, 1<<20)
	}
	nd, vm, om := bufs[in.ndjson], bufs[in.vmJSON], bufs[in.openMetrics]
	_, _ = fmt.Fprintf(om, "# TYPE %s gauge\n", metric)
	n := d.points()
	perLine := int(24 * time.Hour / interval)
	var b []byte
	for i := range d.series {
		vals := d.values(i, n)
		// A series' labels come with its first points.
		_, _ = fmt.Fprintf(nd, `{"series":%q,"labels":{"__name__":%q,"host":%q,"dc":%q}}`+"\n", seriesID(i), metric, host(i), dc(i))
		ndPrefix := []byte(`{"series":"` + seriesID(i) + `","t":`)
		omPrefix := []byte(fmt.Sprintf(`%s{dc=%q,host=%q} `, metric, dc(i), host(i)))
		for k, v := range vals {
			t := d.ts(k)
			b = append(b[:0], ndPrefix...)
			b = strconv.AppendInt(b, t, 10)
			b = append(b, `,"v":`...)
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
			b = append(b, "}\n"...)
			_, _ = nd.Write(b)

			b = append(b[:0], omPrefix...)
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
			b = append(b, ' ')
			b = appendSeconds(b, t)
			b = append(b, '\n')
			_, _ = om.Write(b)
		}
		for k := 0; k < n; k += perLine {
			_, _ = vm.Write(vmLine(i, vals[k:min(k+perLine, n)], d.ts, k))
		}
	}
	_, _ = om.WriteString("# EOF\n")
	for p, w := range bufs {
		if err := w.Flush(); err != nil {
			return in, err
		}
		if err := files[p].Close(); err != nil {
			return in, err
		}
	}
	return in, nil
}

// vmLine is one line of VictoriaMetrics' JSON import format: series i's
// values from point index k0 on.
func vmLine(i int, vals []float64, ts func(int) int64, k0 int) []byte {
	b := fmt.Appendf(nil, `{"metric":{"__name__":%q,"host":%q,"dc":%q},"values":[`, metric, host(i), dc(i))
	for j, v := range vals {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	b = append(b, `],"timestamps":[`...)
	for j := range vals {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, ts(k0+j), 10)
	}
	return append(b, "]}\n"...)
}

// appendSeconds appends Unix milliseconds as OpenMetrics seconds.
func appendSeconds(b []byte, ms int64) []byte {
	b = strconv.AppendInt(b, ms/1000, 10)
	if r := ms % 1000; r != 0 {
		b = append(b, '.')
		b = append(b, fmt.Sprintf("%03d", r)...)
	}
	return b
}
