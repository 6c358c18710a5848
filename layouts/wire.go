package layouts

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tsgate/tsgate/cache"
	"github.com/tsgate/tsgate/tiers"
)

// Service is the package's parts as the gateway serves them: layout
// administration, the wide-partition tracker and the cached blocked list.
type Service struct {
	*Admin
	*Tracker
	*cache.Blocked
	refusals *prometheus.CounterVec
}

// Options are what New needs besides the store.
type Options struct {
	// Series is the series cache the gateway reads layouts through; its
	// entry of a series is dropped when the series' layout changes.
	Series *cache.Series
	Raw    tiers.Tier
	Config Config
	// BlockedTTL is how long the blocked list is cached (the series cache
	// TTL).
	BlockedTTL time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// New returns the service over store, and store with its raw partitions
// counted by the service's tracker: the read and write paths go through
// the returned store.
func New(store tiers.Store, o Options) (*Service, tiers.Store) {
	var inv Invalidator
	if o.Series != nil {
		inv = o.Series
	}
	admin := NewAdmin(store, inv, o.Raw, o.Config, o.Now, o.Logger, o.Registerer)
	tracker := NewTracker(o.Config, o.Logger, o.Registerer, admin.OnWide)
	blocked := cache.NewBlocked(store, o.BlockedTTL, o.Now)
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tsgate_blocked_refusals_total", Help: "Reads, and series of write batches, refused because the series is blocked, by path (read, write).",
	}, []string{"path"})
	refusals.WithLabelValues("read")
	refusals.WithLabelValues("write")
	if o.Registerer != nil {
		o.Registerer.MustRegister(refusals)
	}
	return &Service{Admin: admin, Tracker: tracker, Blocked: blocked, refusals: refusals}, Track(store, tracker)
}

// Guard returns the lookup reads start with: next, refusing blocked
// series.
func (s *Service) Guard(next Lookup) Guard {
	return Guard{Next: next, Blocks: countedBlocks{s.Blocked, s.refusals.WithLabelValues("read")}}
}

// ForWrites is the blocked list as the write path asks it.
func (s *Service) ForWrites() BlockSource {
	return countedBlocks{s.Blocked, s.refusals.WithLabelValues("write")}
}

// countedBlocks counts the lookups that find a block.
type countedBlocks struct {
	next BlockSource
	c    prometheus.Counter
}

func (b countedBlocks) IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error) {
	bs, ok, err := b.next.IsBlocked(ctx, series)
	if ok {
		b.c.Inc()
	}
	return bs, ok, err
}
