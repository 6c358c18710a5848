package cache

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"

	"github.com/tsgate/tsgate/tiers"
)

// SeriesRegistry is the part of the registry the series cache fronts.
type SeriesRegistry interface {
	LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error)
	NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error
	MarkRewritten(ctx context.Context, ids []string) error
}

// Series caches registry lookups. A series' span is served from the cache
// for InfoTTL (reads bound their bucket enumeration by it, so it must be
// fresh), its layout for LayoutTTL (layouts only change from a boundary
// announced further ahead than that). Writes through NoteSeries widen the
// cached spans at once, so a read after a write on the same instance sees
// the new points.
type Series struct {
	next      SeriesRegistry
	infoTTL   time.Duration
	layoutTTL time.Duration
	now       func() time.Time

	mu    sync.Mutex
	lru   *lru.LRU[string, *seriesEntry]
	group singleflight.Group
}

type seriesEntry struct {
	info    tiers.SeriesInfo
	missing bool
	at      time.Time
}

// NewSeries returns a cache of at most size series.
func NewSeries(next SeriesRegistry, size int, infoTTL, layoutTTL time.Duration, now func() time.Time) *Series {
	c, _ := lru.NewLRU[string, *seriesEntry](max(1, size), nil)
	return &Series{next: next, infoTTL: infoTTL, layoutTTL: layoutTTL, now: now, lru: c}
}

// LookupSeries returns the series, from the cache when fresh enough.
func (s *Series) LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	e, err := s.lookup(ctx, id, s.infoTTL)
	if err != nil {
		return tiers.SeriesInfo{}, err
	}
	if e.missing {
		return tiers.SeriesInfo{}, tiers.ErrNotFound
	}
	return e.info, nil
}

// LookupSeriesOf returns the series of ids the registry has: from the
// cache those fresh enough (as LookupSeries), the others with one lookup
// of the registry when it can look many up at once (tiers.RegistryBatch),
// which the cache then holds, the ids it lacks as missing; else, or when
// that lookup fails, one by one.
func (s *Series) LookupSeriesOf(ctx context.Context, ids []string) (map[string]tiers.SeriesInfo, error) {
	out := make(map[string]tiers.SeriesInfo, len(ids))
	var misses []string
	now := s.now()
	s.mu.Lock()
	for _, id := range ids {
		if e, ok := s.lru.Get(id); ok && now.Sub(e.at) < s.infoTTL {
			if !e.missing {
				out[id] = e.info
			}
			continue
		}
		misses = append(misses, id)
	}
	s.mu.Unlock()
	if len(misses) == 0 {
		return out, nil
	}
	if batch, ok := s.next.(tiers.RegistryBatch); ok && len(misses) > 1 {
		if found, err := batch.LookupSeriesOf(ctx, misses); err == nil {
			at := s.now()
			s.mu.Lock()
			for _, id := range misses {
				info, ok := found[id]
				s.lru.Add(id, &seriesEntry{info: info, missing: !ok, at: at})
				if ok {
					out[id] = info
				}
			}
			s.mu.Unlock()
			return out, nil
		}
	}
	found, err := tiers.LookupEach(ctx, misses, s.LookupSeries)
	if err != nil {
		return nil, err
	}
	maps.Copy(out, found)
	return out, nil
}

// Layout returns the series' raw layout (nil for the default, also for a
// series not written yet).
func (s *Series) Layout(ctx context.Context, id string) (tiers.Layout, error) {
	e, err := s.lookup(ctx, id, s.layoutTTL)
	if err != nil {
		return nil, err
	}
	return e.info.Layout, nil
}

func (s *Series) lookup(ctx context.Context, id string, ttl time.Duration) (*seriesEntry, error) {
	s.mu.Lock()
	e, ok := s.lru.Get(id)
	s.mu.Unlock()
	if ok && s.now().Sub(e.at) < ttl {
		return e, nil
	}
	v, err, _ := s.group.Do(id, func() (any, error) {
		info, err := s.next.LookupSeries(ctx, id)
		e := &seriesEntry{info: info, at: s.now()}
		if errors.Is(err, tiers.ErrNotFound) {
			e.missing, err = true, nil
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.lru.Add(id, e)
		s.mu.Unlock()
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*seriesEntry), nil
}

// NoteSeries writes through to the registry and widens cached entries.
func (s *Series) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	if err := s.next.NoteSeries(ctx, spans); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range spans {
		e, ok := s.lru.Peek(sp.ID)
		if !ok {
			continue
		}
		if e.missing {
			// A new series: the registry has more of it than its span
			// (labels, layout), so the next lookup reads it whole.
			s.lru.Remove(sp.ID)
			continue
		}
		// Entries are shared with readers: replace, never mutate.
		n := *e
		n.info.First = min(n.info.First, sp.First)
		n.info.Last = max(n.info.Last, sp.Last)
		s.lru.Add(sp.ID, &n)
	}
	return nil
}

// MarkRewritten writes through to the registry and drops the series'
// cached entries, so that local reads key their cached buckets on the new
// generation at once.
func (s *Series) MarkRewritten(ctx context.Context, ids []string) error {
	if err := s.next.MarkRewritten(ctx, ids); err != nil {
		return err
	}
	for _, id := range ids {
		s.Invalidate(id)
	}
	return nil
}

// Invalidate drops the cached entry of a series, so that the next lookup
// reads the registry: an instance that changes a series' layout uses the
// new layout at once, while other instances pick it up within their TTL.
func (s *Series) Invalidate(id string) {
	s.mu.Lock()
	s.lru.Remove(id)
	s.mu.Unlock()
}
