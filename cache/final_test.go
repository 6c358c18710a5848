package cache

import (
	"context"
	"testing"
	"time"

	"github.com/tsgate/tsgate/tiers"
)

type fixedRollups tiers.Watermarks

func (f fixedRollups) Watermarks(context.Context) tiers.Watermarks { return tiers.Watermarks(f) }

// The finality rules, edge by edge: raw rows are final once no on-time
// point can land, late rows under a version of their late mark (never
// without one), rollup rows once rolled up (late corrections change the
// series' generation, which the cache keys on).
func TestFinality(t *testing.T) {
	p := tiers.DefaultPyramid()
	now := time.UnixMilli(400 * tiers.Day)
	n := now.UnixMilli()
	const lateness, grace = 15 * time.Minute, time.Minute
	wm := fixedRollups{tiers.MaxTime, n - 30*tiers.Minute, n - 2*tiers.Hour, n - 30*tiers.Day}
	f := Finality{Pyramid: p, Lateness: lateness, Grace: grace, Rollups: wm, Now: func() time.Time { return now }}
	settled := n - grace.Milliseconds() - lateness.Milliseconds() // a raw span ending here is final
	read := func(table tiers.Table, to int64) tiers.ReadRequest {
		return tiers.ReadRequest{Key: tiers.PartitionKey{Table: table, Series: "s"}, Span: tiers.Span{From: to - tiers.Hour, To: to}}
	}
	versioned := func(r tiers.ReadRequest, v int64) tiers.ReadRequest { r.Version = v; return r }
	for _, c := range []struct {
		name  string
		req   tiers.ReadRequest
		final bool
	}{
		{"raw span ending at the lateness edge", read(tiers.TableRaw, settled), true},
		{"raw span ending 1ms later", read(tiers.TableRaw, settled+1), false},
		{"late rows without a version, however old", read(tiers.TableLate, n-300*tiers.Day), false},
		{"late rows under a version of their mark, however recent", versioned(read(tiers.TableLate, n), 7), true},
		{"minute rows rolled up, a minute old", read("rollup_1m", n-30*tiers.Minute), true},
		{"minute rows ending 1ms past the minute watermark", read("rollup_1m", n-30*tiers.Minute+1), false},
		{"hour rows rolled up", read("rollup_1h", n-2*tiers.Hour), true},
		{"hour rows not rolled up yet", read("rollup_1h", n-tiers.Hour), false},
		{"day rows not rolled up yet", read("rollup_1d", n-10*tiers.Day), false},
		{"day rows rolled up", read("rollup_1d", n-30*tiers.Day), true},
		{"a table of no tier", read("rollup_10s", n-300*tiers.Day), false},
	} {
		if got := f.Final(c.req); got != c.final {
			t.Errorf("%s: Final = %v, want %v", c.name, got, c.final)
		}
	}
	// Nothing rolled up: no rollup read is final.
	f.Rollups = fixedRollups(tiers.NoWatermarks(p))
	if f.Final(read("rollup_1h", n-300*tiers.Day)) {
		t.Error("a rollup read was final before any rollup ran")
	}
}
