package gateway

import (
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/layouts"
	"github.com/tsgate/tsgate/tiers"
)

func registerLayoutFlags(fs *flag.FlagSet, c *layouts.Config) {
	fs.Int64Var(&c.WideRows, "wide-partition-rows", c.WideRows, "rows above which a raw partition is wide: counted in /metrics, logged once, split with --auto-split")
	fs.IntVar(&c.Tracked, "wide-partitions-tracked", c.Tracked, "raw partitions the wide-partition tracker remembers (per instance)")
	fs.BoolVar(&c.AutoSplit, "auto-split", c.AutoSplit, "give a series whose partitions grow wide twice the event buckets from the next possible boundary")
	fs.IntVar(&c.MaxEventBuckets, "max-event-buckets", c.MaxEventBuckets, "most event buckets a layout may have (auto-split and PUT /v1/admin/series/{id}/layout)")
}

// newLayouts wires layout administration, the wide-partition tracker and
// the blocked list over store, and returns the store the read and write
// paths use (their raw partitions counted).
func (g *Gateway) newLayouts(store tiers.Store, cfg Config, reg prometheus.Registerer) tiers.Store {
	lc := cfg.Layouts
	lc.Lateness, lc.ClockSkew, lc.LayoutTTL = cfg.Ingest.Lateness, cfg.Ingest.ClockSkew, cfg.LayoutTTL
	svc, tracked := layouts.New(store, layouts.Options{
		Series: g.Series, Raw: *cfg.Pyramid.Raw(), Config: lc,
		BlockedTTL: cfg.SeriesTTL, Now: g.Now, Logger: g.Logger, Registerer: reg,
	})
	g.Layouts = svc
	return tracked
}
