// Package demo generates the demo series that `gateway serve --demo` loads
// into an empty store: sensor-like signals with daily cycles, drift, noise
// and bursts, at cadences from one second to one minute, over the last days.
// Values are a deterministic function of time and series, so a reload gives
// the same data.
package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/tiers"
)

// Series describes one demo series.
type Series struct {
	ID      string
	Cadence int64 // ms between points
	Span    int64 // how far back from now the series starts
	value   func(r *rand.Rand, t int64, prev float64) float64
}

// All returns the demo series.
func All() []Series {
	day := float64(tiers.Day)
	return []Series{
		{ID: "demo.power.meter1", Cadence: tiers.Second, Span: 2 * tiers.Day, value: func(r *rand.Rand, t int64, prev float64) float64 {
			// A base load with a daily cycle and appliances switching on.
			base := 380 + 120*math.Sin(2*math.Pi*float64(t)/day)
			if r.IntN(600) == 0 || (prev > base+500 && r.IntN(40) != 0) {
				return math.Round((base+1800+r.NormFloat64()*40)*10) / 10
			}
			return math.Round((base+r.NormFloat64()*12)*10) / 10
		}},
		{ID: "demo.cpu.host1", Cadence: 5 * tiers.Second, Span: 3 * tiers.Day, value: func(r *rand.Rand, t int64, prev float64) float64 {
			v := 0.85*prev + 0.15*(18+10*math.Sin(2*math.Pi*float64(t)/day)) + r.NormFloat64()*3
			if r.IntN(2000) == 0 {
				v = 97
			}
			return math.Round(math.Min(100, math.Max(0, v))*100) / 100
		}},
		{ID: "demo.temperature.office", Cadence: 10 * tiers.Second, Span: 6 * tiers.Day, value: func(r *rand.Rand, t int64, prev float64) float64 {
			target := 21 + 2.5*math.Sin(2*math.Pi*(float64(t)/day-0.3))
			return math.Round((0.98*prev+0.02*target+r.NormFloat64()*0.03)*1000) / 1000
		}},
		{ID: "demo.humidity.office", Cadence: tiers.Minute, Span: 6 * tiers.Day, value: func(r *rand.Rand, t int64, prev float64) float64 {
			target := 45 - 8*math.Sin(2*math.Pi*(float64(t)/day-0.3))
			return math.Round((0.9*prev+0.1*target+r.NormFloat64()*0.4)*10) / 10
		}},
	}
}

// Points generates the series' points from now-Span to now, in time order,
// calling emit with batches of at most batch points.
func (s Series) Points(now int64, batch int, emit func([]ingest.Point) error) error {
	r := rand.New(rand.NewPCG(uint64(len(s.ID)), uint64(s.Cadence)))
	start := tiers.AlignDown(now-s.Span, s.Cadence)
	prev := s.value(r, start, 0)
	if s.ID == "demo.temperature.office" {
		prev = 21
	}
	buf := make([]ingest.Point, 0, batch)
	for t := start; t < now; t += s.Cadence {
		prev = s.value(r, t, prev)
		buf = append(buf, ingest.Point{Series: s.ID, T: t, V: prev})
		if len(buf) == batch {
			if err := emit(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		return emit(buf)
	}
	return nil
}

// Count is the number of points Points generates.
func (s Series) Count(now int64) int64 {
	start := tiers.AlignDown(now-s.Span, s.Cadence)
	return (now - start + s.Cadence - 1) / s.Cadence
}

// Load writes every demo series through w, reporting progress as a
// fraction of the points written.
func Load(ctx context.Context, w *ingest.Writer, now int64, progress func(done, total int64)) error {
	var total, done int64
	for _, s := range All() {
		total += s.Count(now)
	}
	for _, s := range All() {
		err := s.Points(now, 20000, func(batch []ingest.Point) error {
			if _, err := w.Backfill(ctx, batch); err != nil {
				return fmt.Errorf("load %s: %w", s.ID, err)
			}
			done += int64(len(batch))
			progress(done, total)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
