package layouts

import (
	"context"

	"github.com/tsgate/tsgate/tiers"
)

// BlockSource tells whether a series is blocked (usually the cache of the
// blocked list).
type BlockSource interface {
	IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error)
}

// Lookup is the registry lookup reads start with.
type Lookup interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
}

// Guard answers a lookup of a blocked series with *tiers.BlockedError
// before anything else is read: a read starts with the lookup, so a blocked
// series' partitions are never reached.
type Guard struct {
	Next   Lookup
	Blocks BlockSource
}

// LookupSeries returns the series, or *tiers.BlockedError when it is
// blocked.
func (g Guard) LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	b, blocked, err := g.Blocks.IsBlocked(ctx, id)
	if err != nil {
		return tiers.SeriesInfo{}, err
	}
	if blocked {
		return tiers.SeriesInfo{}, &tiers.BlockedError{Block: b}
	}
	return g.Next.LookupSeries(ctx, id)
}
