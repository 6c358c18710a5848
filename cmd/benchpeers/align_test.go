package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

var testSet = dataset{series: 2, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), end: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), seed: 7}

// No point lies on the boundary of any panel's windows, so both window
// conventions hold the same points.
func TestPointsNeverOnAWindowBoundary(t *testing.T) {
	for _, p := range []panel{{rng: time.Hour, raw: true}, {rng: 24 * time.Hour}, {rng: 7 * 24 * time.Hour}, {rng: 90 * 24 * time.Hour}} {
		step := p.step().Milliseconds()
		for k := range testSet.points() {
			if testSet.ts(k)%step == 0 {
				t.Fatalf("point %d at %d is on a %d ms boundary", k, testSet.ts(k), step)
			}
		}
	}
	for k := -3; k < 3000; k++ {
		if got := testSet.index(testSet.ts(k)); got != k {
			t.Fatalf("index(ts(%d)) = %d", k, got)
		}
		if got := testSet.index(testSet.ts(k) - 1); got != k {
			t.Fatalf("index(ts(%d)-1) = %d", k, got)
		}
	}
}

func TestRoundStepIsTheSmallestLadderStepThatFits(t *testing.T) {
	ladder := []time.Duration{}
	for need := time.Second; need <= 30*24*time.Hour; need += time.Second {
		s := roundStep(need)
		if s < need {
			t.Fatalf("roundStep(%s) = %s, less than needed", need, s)
		}
		if len(ladder) == 0 || ladder[len(ladder)-1] != s {
			if len(ladder) > 0 && roundStep(need-time.Second) >= need {
				t.Fatalf("roundStep(%s) = %s although %s fits", need, s, roundStep(need-time.Second))
			}
			ladder = append(ladder, s)
		}
	}
	if fmt.Sprint(ladder[:7]) != "[1s 2s 5s 10s 15s 30s 1m0s]" || ladder[len(ladder)-1] != 5*7*24*time.Hour {
		t.Fatalf("ladder %v", ladder)
	}
}

// windowsOf aggregates series i of the test set into windows of step
// starting in [from, to), as the gateway labels them.
func windowsOf(i int, from, to int64, step time.Duration) []win {
	vals := testSet.values(i, testSet.points())
	sums := map[int64][2]float64{}
	var order []int64
	for k, v := range vals {
		t := testSet.ts(k)
		w := t - t%step.Milliseconds()
		if w < from || w >= to {
			continue
		}
		if _, ok := sums[w]; !ok {
			order = append(order, w)
		}
		s := sums[w]
		sums[w] = [2]float64{s[0] + v, s[1] + 1}
	}
	out := []win{}
	for _, w := range order {
		out = append(out, win{w, sums[w][0] / sums[w][1]})
	}
	return out
}

// A gateway answer and a PromQL answer of the same windows, each in its
// own convention, decode to the same windows; a PromQL answer a step off
// does not.
func TestBothConventionsDecodeToTheSameWindows(t *testing.T) {
	p := panel{name: "24 h", rng: 24 * time.Hour}
	step := p.step()
	from, to := testSet.end.Add(-p.rng).UnixMilli(), testSet.end.UnixMilli()
	ws := windowsOf(0, from, to, step)
	if len(ws) != int(p.rng/step) {
		t.Fatalf("%d windows, want %d", len(ws), p.rng/step)
	}

	gw := map[string]any{"series": seriesID(0), "resolution_ms": step.Milliseconds(), "columns": []string{"t", "avg"}}
	var pts [][]float64
	for _, w := range ws {
		pts = append(pts, []float64{float64(w.t), w.v})
	}
	gw["points"] = pts
	gwBody, _ := json.Marshal(gw)

	prom := func(shift time.Duration) []byte {
		var vals [][2]any
		for _, w := range ws {
			vals = append(vals, [2]any{float64(w.t+step.Milliseconds()+shift.Milliseconds()) / 1000, strconv.FormatFloat(w.v, 'g', -1, 64)})
		}
		b, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix",
			"result": []any{map[string]any{"metric": map[string]string{"__name__": metric, "host": host(0)}, "values": vals}}}})
		return b
	}
	a, err := decodeGateway(gwBody, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodePromQL(prom(0), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := compare(a, b, "avg"); err != nil {
		t.Fatal(err)
	}
	c, err := decodePromQL(prom(step), p)
	if err != nil {
		t.Fatal(err)
	}
	if compare(c, b, "avg") == nil {
		t.Fatal("answers a step apart compare equal")
	}
}

// Raw points decode to the interval that holds them, the windows of
// avg_over_time(x[10s]) at a 10 s step.
func TestRawPointsDecodeToTheirInterval(t *testing.T) {
	p := panel{name: "last 1 h raw", rng: time.Hour, raw: true}
	vals := testSet.values(1, 3)
	var pts [][]float64
	var promVals [][2]any
	for k, v := range vals {
		pts = append(pts, []float64{float64(testSet.ts(k)), v})
		promVals = append(promVals, [2]any{float64(testSet.ts(k)+offset.Milliseconds()) / 1000, strconv.FormatFloat(v, 'f', -1, 64)})
	}
	gwBody, _ := json.Marshal(map[string]any{"results": []any{map[string]any{"series": seriesID(1), "labels": map[string]string{"host": host(1)},
		"resolution_ms": 0, "columns": []string{"t", "v"}, "points": pts}}})
	promBody, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"result": []any{
		map[string]any{"metric": map[string]string{"host": host(1)}, "values": promVals}}}})
	p.all = true
	a, err := decodeGateway(gwBody, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodePromQL(promBody, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := compare(a, b, "min"); err != nil {
		t.Fatal(err)
	}
	if a[host(1)][0].t != testSet.start.UnixMilli() {
		t.Fatalf("first point labelled %d, want the start of its interval %d", a[host(1)][0].t, testSet.start.UnixMilli())
	}
}

// The data set is the same on every run, and the refreshing dashboard's
// points continue each series where the data set ends.
func TestValuesAreDeterministicAndContinue(t *testing.T) {
	n := testSet.points()
	a, b := testSet.values(1, n+5), testSet.values(1, n)
	for k := range b {
		if a[k] != b[k] {
			t.Fatalf("value %d differs between runs: %v, %v", k, a[k], b[k])
		}
	}
	g := testSet.gauge(1)
	for range n {
		g.next()
	}
	for k := n; k < n+5; k++ {
		if v := g.next(); v != a[k] {
			t.Fatalf("continued value %d = %v, want %v", k, v, a[k])
		}
	}
	if testSet.values(0, 1)[0] == a[0] {
		t.Fatal("two series start at the same value")
	}
}

// The benchmark sends its load to loopback addresses only.
func TestLoopbackHosts(t *testing.T) {
	for hosts, want := range map[string]bool{
		"127.0.0.1:9042": true, "127.0.0.2:9042,127.0.0.3:9042": true, "[::1]:9042": true, "127.0.0.1": true,
		"10.0.0.1:9042": false, "localhost:9042": false, "127.0.0.1:9042,192.168.1.1:9042": false, "": false,
	} {
		if got := loopbackHosts(hosts); got != want {
			t.Errorf("loopbackHosts(%q) = %v, want %v", hosts, got, want)
		}
	}
}
