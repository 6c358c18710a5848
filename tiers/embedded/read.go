package embedded

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tsgate/tsgate/tiers"
)

const (
	// defaultPageSize applies to a request without a page size, as the
	// Cassandra driver's default page size does.
	defaultPageSize = 5000
	// firstPageRows and maxInitialPage cap the up-front allocation of a
	// partition's first page and of the pages after a full one, so that a
	// large page size on a small partition does not allocate for rows that
	// are not there; a page that fills up grows by append. Rows hold a
	// pointer, so every row allocated is also cleared: the open buckets a
	// refreshed panel reads hold some tens to hundreds of rows each, and a
	// first page of 1024 was most of what such a read allocated.
	firstPageRows  = 128
	maxInitialPage = 1024
	// ctxCheckEvery is how many keys a page visits between checks of the
	// context, so that a page skipping many expired rows still stops soon.
	ctxCheckEvery = 1024
)

// errReadClosed is returned by Next after Close.
var errReadClosed = errors.New("embedded: read is closed")

// Read starts reading one partition. Nothing is opened until the first
// Next, so a read that is never consumed holds nothing.
func (s *Store) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	p := &rowPages{s: s, ctx: ctx, req: req}
	if req.PageSize <= 0 {
		p.req.PageSize = defaultPageSize
	}
	code, err := checkPartition(req.Key)
	if err != nil {
		p.err = err
		return p
	}
	if req.Span.Empty() {
		p.err = tiers.ErrDone
		return p
	}
	p.raw = code.raw
	p.sealed = sealable(req.Key)
	// Both bounds in one allocation, kept until the first Next opens the
	// iterator (Pebble copies them then).
	p.prefixLen = len(code.prefix) + len(req.Key.Series) + 1 + timeLen + ebLen
	n := p.prefixLen + timeLen
	b := appendPartition(make([]byte, 0, 2*n), code, req.Key)
	b = appendTime(b, req.Span.From)
	b = append(b, b[:p.prefixLen]...)
	b = appendTime(b, req.Span.To)
	p.lower, p.upper = b[:n:n], b[n:]
	return p
}

// rowPages reads one partition through a Pebble iterator bounded to the
// partition's keys in the span. Its methods are called by one goroutine;
// Store.Close may release it from another, which the store's mu orders.
type rowPages struct {
	s   *Store
	ctx context.Context
	req tiers.ReadRequest

	raw       bool
	prefixLen int
	// sealed says the partition may have sealed chunks; points holds
	// their points in the span that are not returned yet, in read order.
	sealed       bool
	points       []tiers.Row
	lower, upper []byte

	// xs and arena hold the extras of the rows handed out (see extras).
	xs    []tiers.Extras
	arena []byte

	iter *pebble.Iterator
	// valid says whether iter is positioned on a row not yet returned.
	valid bool
	// pageRows is the capacity a page starts with: firstPageRows, then
	// maxInitialPage once a page has filled up.
	pageRows int
	now      int64
	// err ends the read: ErrDone, ctx's error, ErrClosed or a read error.
	err error
}

// Next returns the next page of rows.
func (p *rowPages) Next() ([]tiers.Row, error) {
	s := p.s
	if err := s.enter(); err != nil {
		// Close has released the read; a read that had already ended keeps
		// its outcome.
		if p.err != nil {
			return nil, p.err
		}
		return nil, err
	}
	defer s.mu.RUnlock()
	if p.err != nil {
		return nil, p.err
	}
	if err := p.ctx.Err(); err != nil {
		p.finish(err)
		return nil, err
	}
	if p.iter == nil {
		if err := p.start(); err != nil {
			p.finish(err)
			return nil, err
		}
	}
	page, err := p.fill()
	if err != nil {
		p.finish(err)
		return nil, err
	}
	if !p.valid && len(p.points) == 0 {
		// Let go of the iterator as soon as the partition is exhausted,
		// rather than when the caller gets round to Close.
		p.finish(tiers.ErrDone)
	}
	if len(page) == 0 {
		return nil, tiers.ErrDone
	}
	return page, nil
}

func (p *rowPages) start() error {
	s := p.s
	// One clock reading per read: a row expiring during a read is returned
	// or not consistently across its pages.
	p.now = s.nowMs()
	opts := &pebble.IterOptions{LowerBound: p.lower, UpperBound: p.upper}
	if p.sealed {
		// The chunks first, through the iterator that then reads the rows:
		// one view of the store, so a seal committing meanwhile is seen
		// whole or not at all.
		code, _ := tableCodeOf(p.req.Key.Table)
		opts.LowerBound, opts.UpperBound = chunkBounds(code, p.req.Key, p.req.Span.To)
	}
	it, err := s.db.NewIterWithContext(p.ctx, opts)
	if err != nil {
		return fmt.Errorf("embedded: read %s/%s: %w", p.req.Key.Table, p.req.Key.Series, err)
	}
	p.iter = it
	s.readsMu.Lock()
	s.reads[p] = struct{}{}
	s.readsMu.Unlock()
	if p.sealed {
		read := chunkRead{span: p.req.Span, now: p.now, eventBucket: p.req.Key.EventBucket, rollup: !p.raw, extras: p.req.Extras}
		if p.points, err = loadChunks(nil, it, read); err != nil {
			return fmt.Errorf("embedded: read %s/%s: %w", p.req.Key.Table, p.req.Key.Series, err)
		}
		if p.req.Desc {
			slices.Reverse(p.points)
		}
		it.SetBounds(p.lower, p.upper)
	}
	if p.req.Desc {
		p.valid = it.Last()
	} else {
		p.valid = it.First()
	}
	return nil
}

// fill collects the next page, leaving the iterator on the first row of the
// page after it.
func (p *rowPages) fill() ([]tiers.Row, error) {
	it := p.iter
	size := p.req.PageSize
	if p.pageRows == 0 {
		p.pageRows = firstPageRows
	}
	var page []tiers.Row
	visited := 0
	for (p.valid || len(p.points) > 0) && len(page) < size {
		if !p.valid {
			// Rows exhausted: the rest is sealed points, the read's own,
			// handed over without a copy when the page holds nothing else.
			n := min(size-len(page), len(p.points))
			if page == nil {
				page = p.points[:n:n]
			} else {
				page = append(page, p.points[:n]...)
			}
			p.points = p.points[n:]
			continue
		}
		if visited++; visited%ctxCheckEvery == 0 {
			if err := p.ctx.Err(); err != nil {
				return nil, err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("embedded: read %s/%s: %w", p.req.Key.Table, p.req.Key.Series, err)
		}
		key := it.Key()
		if len(key) != p.prefixLen+timeLen || len(v) < expiryLen {
			return nil, fmt.Errorf("embedded: corrupt row %x in %s/%s", key, p.req.Key.Table, p.req.Key.Series)
		}
		if !expired(getExpiry(v), p.now) {
			r, ok := getRow(v, p.raw, getTime(key[p.prefixLen:]))
			if !ok {
				return nil, fmt.Errorf("embedded: corrupt row %x in %s/%s", key, p.req.Key.Table, p.req.Key.Series)
			}
			if page == nil {
				page = make([]tiers.Row, 0, min(size, p.pageRows))
			}
			// Sealed points before the row come first; a row replaces the
			// sealed point of its time.
			for len(p.points) > 0 && len(page) < size && p.before(p.points[0].T, r.T) {
				page = append(page, p.points[0])
				p.points = p.points[1:]
			}
			if len(page) == size {
				break // the row opens the next page
			}
			if len(p.points) > 0 && p.points[0].T == r.T {
				p.points = p.points[1:]
			}
			if p.req.Extras && !p.raw {
				x, err := p.extras(r, extrasOf(v))
				if err != nil {
					return nil, fmt.Errorf("embedded: row %x in %s/%s: %w", key, p.req.Key.Table, p.req.Key.Series, err)
				}
				r.X = x
			}
			page = append(page, r)
		}
		if p.req.Desc {
			p.valid = it.Prev()
		} else {
			p.valid = it.Next()
		}
	}
	if !p.valid {
		if err := it.Error(); err != nil {
			return nil, fmt.Errorf("embedded: read %s/%s: %w", p.req.Key.Table, p.req.Key.Series, err)
		}
	}
	if len(page) == size {
		p.pageRows = maxInitialPage
	}
	return page, nil
}

// extras decodes a rollup row's extras from enc, which the iterator owns:
// the sketch is copied into an arena the page's rows share, and the
// Extras come from a block of them, so that a page of rows with extras
// costs a few allocations rather than two a row.
func (p *rowPages) extras(r tiers.Row, enc []byte) (*tiers.Extras, error) {
	if len(p.xs) == 0 {
		p.xs = make([]tiers.Extras, min(p.req.PageSize, maxInitialPage))
	}
	if len(enc) > cap(p.arena)-len(p.arena) {
		p.arena = make([]byte, 0, max(len(enc), 16<<10))
	}
	start := len(p.arena)
	p.arena = append(p.arena, enc...)
	x := &p.xs[0]
	if err := tiers.DecodeExtrasInto(x, r, p.arena[start:len(p.arena):len(p.arena)]); err != nil {
		return nil, err
	}
	p.xs = p.xs[1:]
	return x, nil
}

// before reports whether time a comes before b in the read's order.
func (p *rowPages) before(a, b int64) bool {
	if p.req.Desc {
		return a > b
	}
	return a < b
}

// finish ends the read with err and releases the iterator.
func (p *rowPages) finish(err error) {
	if p.iter != nil {
		p.s.readsMu.Lock()
		delete(p.s.reads, p)
		p.s.readsMu.Unlock()
	}
	p.release(err)
}

// release closes the iterator and records why the read ended. Close calls
// it with the store locked exclusively and unregisters the reads itself.
func (p *rowPages) release(err error) {
	if p.err == nil {
		p.err = err
	}
	if p.iter != nil {
		if cerr := p.iter.Close(); cerr != nil {
			p.s.log.Warn("closing a partition read", "table", p.req.Key.Table, "series", p.req.Key.Series, "err", cerr)
		}
		p.iter = nil
		p.valid = false
	}
	if !errors.Is(err, tiers.ErrDone) {
		p.points = nil
	}
}

// Close releases the read.
func (p *rowPages) Close() error {
	if err := p.s.enter(); err != nil {
		return nil // Close of the store released it
	}
	defer p.s.mu.RUnlock()
	p.finish(errReadClosed)
	return nil
}
