package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// randomPyramid returns the spec of a valid pyramid of 1 to 5 tiers: steps
// each a multiple of the one below, buckets whole numbers of windows,
// retentions growing, the coarsest sometimes kept forever. Every shape the
// tier parser accepts is fair game for an import.
func randomPyramid(r *rand.Rand) string {
	n := 1 + r.IntN(5)
	raw := []string{"1h", "2h", "6h", "1d"}[r.IntN(4)]
	retention := int64(2+r.IntN(6)) * tiers.Day
	auto := func(i int) string { // thresholds grow with the step; none on the coarsest
		if i == n-1 {
			return ""
		}
		return fmt.Sprintf(",auto-max=%dh", 1<<(2*i))
	}
	parts := []string{fmt.Sprintf("name=raw,bucket=%s,event-buckets=%d,retention=%s%s",
		raw, 1+r.IntN(4), tiers.FormatDuration(retention), auto(0))}
	step := int64(0)
	for i := 1; i < n; i++ {
		switch {
		case step == 0:
			step = []int64{10 * tiers.Second, 30 * tiers.Second, tiers.Minute}[r.IntN(3)]
		default:
			step *= int64([]int{2, 5, 6, 10, 60}[r.IntN(5)])
		}
		bucket := step * int64([]int{60, 240, 1440}[r.IntN(3)])
		retention *= int64(2 + r.IntN(3))
		ret := tiers.FormatDuration(retention)
		if i == n-1 && r.IntN(2) == 0 {
			ret = "0"
		}
		parts = append(parts, fmt.Sprintf("name=t%d,step=%s,bucket=%s,retention=%s%s",
			i, tiers.FormatDuration(step), tiers.FormatDuration(bucket), ret, auto(i)))
	}
	return strings.Join(parts, ";")
}

// For pyramids of every shape the tier parser accepts — a raw tier alone
// included — gateway import writes each series of history into the tier
// that should keep it, the rollups fill every coarser tier, and the engine
// reads it all back: every tier's rows equal brute force.
func TestImportIntoEveryPyramid(t *testing.T) {
	specs := []string{
		"name=raw,bucket=1h,retention=7d",
		"name=raw,bucket=1d,event-buckets=3,retention=400d",
		"name=raw,bucket=1h,retention=2d,auto-max=1h;name=minute,step=1m,bucket=1d,retention=0",
		fiveTiers,
	}
	r := rand.New(rand.NewPCG(23, 5))
	for range 6 {
		specs = append(specs, randomPyramid(r))
	}
	now := testClock().UnixMilli()
	for i, spec := range specs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			p, err := tiers.ParsePyramid(spec, params.Duration)
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			h := pyramidHistory(p, now)
			dir := t.TempDir()
			in := filepath.Join(dir, "in.ndjson")
			all := make([]int, len(h.series))
			for j := range all {
				all[j] = j
			}
			if err := os.WriteFile(in, []byte(h.ndjson(all...)), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "data")
			code, out := runMain(t, nil, "import", "--data-dir", data, "--tiers", spec, "--batch", "300", in)
			if code != 0 {
				t.Fatalf("%s: exit %d:\n%s", spec, code, out)
			}
			h.verifyIn(t, openEmbedded(t, data), p)
		})
	}
}

// pyramidHistory makes one series per tier of p, 12 hours of points
// centred in that tier's band of retention (older than the finer tier
// keeps, younger than the tier itself keeps), so that the import must
// write it into exactly that tier.
func pyramidHistory(p tiers.Pyramid, now int64) history {
	var h history
	younger := int64(0) // the age the finer tier keeps up to
	for _, l := range p.Levels() {
		tr := p.Tier(l)
		var age int64
		switch {
		case tr.Retention == 0:
			age = younger + 3*tiers.Day
		default:
			age = (younger + tr.Retention) / 2
		}
		step := max(tr.Step, 30*tiers.Second)
		from := tiers.AlignDown(now-age-6*tiers.Hour, tiers.Hour)
		if younger == 0 {
			from = tiers.AlignDown(now-14*tiers.Hour, tiers.Hour) // raw: the last day
		}
		s := histSeries{id: fmt.Sprintf("pyr.%s", tr.Name), level: l}
		for k, t := 0, tiers.AlignDown(from, step); t < from+12*tiers.Hour; k, t = k+1, t+step {
			s.points = append(s.points, ingest.Point{Series: s.id, T: t, V: float64(k%29 - 9)})
		}
		h.series = append(h.series, s)
		if tr.Retention == 0 {
			break
		}
		younger = tr.Retention
	}
	return h
}
