package cassandra

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/tiers"
)

// NoteSeries writes first and last of each series as two cells whose write
// timestamps keep the smallest first and the largest last (see
// minWinsStamp), so concurrent calls commute without reading.
func (s *Store) NoteSeries(ctx context.Context, spans []tiers.SeriesInfo) error {
	// Fold repeated ids first: fewer statements, same outcome.
	merged := make(map[string]tiers.SeriesInfo, len(spans))
	for _, sp := range spans {
		if m, ok := merged[sp.ID]; ok {
			sp.First, sp.Last = min(sp.First, m.First), max(sp.Last, m.Last)
		}
		merged[sp.ID] = sp
	}
	var shards [seriesShards][]stmt
	for id, sp := range merged {
		sh := seriesShard(id)
		shards[sh] = append(shards[sh],
			stmt{s.stmts.noteFirst, []any{minWinsStamp(sp.First), sp.First, sh, id}},
			stmt{s.stmts.noteLast, []any{maxWinsStamp(sp.Last), sp.Last, sh, id}})
	}
	var groups []group
	for sh, st := range shards {
		if len(st) > 0 {
			groups = append(groups, group{what: fmt.Sprintf("series registry shard %d", sh), stmts: st})
		}
	}
	return s.execGroups(ctx, groups)
}

// MarkRewritten writes a new generation cell for each series, its write
// timestamp the version (in microseconds), so that the largest wins on
// every replica whatever the order the writes reach them in.
func (s *Store) MarkRewritten(ctx context.Context, ids []string) error {
	version := tiers.NewVersion()
	var shards [seriesShards][]stmt
	for _, id := range ids {
		sh := seriesShard(id)
		shards[sh] = append(shards[sh], stmt{s.stmts.markGeneration, []any{version / 1000, version, sh, id}})
	}
	var groups []group
	for sh, st := range shards {
		if len(st) > 0 {
			groups = append(groups, group{what: fmt.Sprintf("series generations, registry shard %d", sh), stmts: st})
		}
	}
	return s.execGroups(ctx, groups)
}

// LookupSeries reads the series' registry entry (its labels included) and
// its layout history at the same time.
//
// When too few replicas answer for the configured consistency, it reads
// them from one replica instead. Both only ever grow (first/last widen,
// layout entries are appended before points use them), so a stale answer
// is a narrower range, not a wrong one, and it lets a read go on to the
// data partitions, which never fall back: their failures make the answer
// partial (reason "unavailable"), not the whole request fail.
func (s *Store) LookupSeries(ctx context.Context, id string) (tiers.SeriesInfo, error) {
	if !utf8.ValidString(id) {
		// Cassandra would refuse the read; no such series can exist.
		return tiers.SeriesInfo{}, tiers.ErrNotFound
	}
	session, err := s.sess()
	if err != nil {
		return tiers.SeriesInfo{}, err
	}
	info, err := s.lookupSeries(ctx, session, id, nil, true)
	if s.lostRace(err) {
		info, err = s.lookupSeries(ctx, session, id, nil, false)
	}
	if tooFewReplicas(err) {
		weaker := s.weaker()
		if info, werr := s.lookupSeries(ctx, session, id, &weaker, false); werr == nil || errors.Is(werr, tiers.ErrNotFound) {
			return info, werr
		}
	}
	return info, err
}

// lookupSeries is LookupSeries at the configured consistency or at cons,
// with or without speculative reads.
func (s *Store) lookupSeries(ctx context.Context, session *gocql.Session, id string, cons *gocql.Consistency, speculate bool) (tiers.SeriesInfo, error) {
	query := func(stmt string, args ...any) *gocql.Query {
		q := s.read(session.Query(stmt, args...))
		if !speculate {
			q = noSpeculation(q)
		}
		if cons != nil {
			q = q.Consistency(*cons)
		}
		return q
	}
	info := tiers.SeriesInfo{ID: id}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var first, last, gen *int64
		var labels map[string]string
		err := query(s.stmts.lookup, seriesShard(id), id).ScanContext(gctx, &first, &last, &gen, &labels)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return fmt.Errorf("cassandra: look up series %q: %w", id, wrapCtx(gctx, err))
		}
		row, ok := registryInfo(id, first, last, gen, labels)
		if !ok {
			return tiers.ErrNotFound
		}
		info.First, info.Last, info.Generation, info.Labels = row.First, row.Last, row.Generation, row.Labels
		return nil
	})
	g.Go(func() error {
		iter := query(s.stmts.layout, id).IterContext(gctx)
		var e tiers.LayoutEntry
		for iter.Scan(&e.Since, &e.Width, &e.EventBuckets) {
			info.Layout = append(info.Layout, e)
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("cassandra: layout of series %q: %w", id, wrapCtx(gctx, err))
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return tiers.SeriesInfo{}, err
	}
	return info, nil
}

// LookupSeriesOf looks many series up at once (tiers.RegistryBatch): the
// registry rows of the ids of one shard with one query, IN over the ids
// (one partition, one pass), seriesLabelsChunk to a query, and the
// layouts with IN over the series' partitions, as many at a time; the
// queries at once, up to labelReads. A panel of twenty series, first
// read after a restart, then costs the node some fifteen requests rather
// than forty. Unlike LookupSeries it never reads from one replica when
// too few answer: its caller then looks the series up one by one.
func (s *Store) LookupSeriesOf(ctx context.Context, ids []string) (map[string]tiers.SeriesInfo, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	out := make(map[string]tiers.SeriesInfo, len(ids))
	layouts := make(map[string]tiers.Layout)
	var valid []string
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(labelReads)
	for sh, chunk := range registryChunks(ids) {
		valid = append(valid, chunk...)
		g.Go(func() error {
			scan := func(q *gocql.Query) (map[string]tiers.SeriesInfo, error) {
				iter := q.IterContext(gctx)
				found := make(map[string]tiers.SeriesInfo, len(chunk))
				var id string
				var first, last, gen *int64
				var labels map[string]string
				for iter.Scan(&id, &first, &last, &gen, &labels) {
					if info, ok := registryInfo(id, first, last, gen, labels); ok {
						found[id] = info
					}
					first, last, gen, labels = nil, nil, nil, nil
				}
				return found, iter.Close()
			}
			q := func() *gocql.Query { return s.read(session.Query(s.stmts.lookupOf, sh, chunk)) }
			found, err := retryLostRace(s, q, scan)
			if err != nil {
				return fmt.Errorf("cassandra: look up %d series of registry shard %d: %w", len(chunk), sh, wrapCtx(gctx, err))
			}
			mu.Lock()
			maps.Copy(out, found)
			mu.Unlock()
			return nil
		})
	}
	for chunk := range slices.Chunk(valid, seriesLabelsChunk) {
		g.Go(func() error {
			scan := func(q *gocql.Query) (map[string]tiers.Layout, error) {
				iter := q.IterContext(gctx)
				found := make(map[string]tiers.Layout)
				var id string
				var e tiers.LayoutEntry
				for iter.Scan(&id, &e.Since, &e.Width, &e.EventBuckets) {
					// Rows come partition by partition, each by since.
					found[id] = append(found[id], e)
				}
				return found, iter.Close()
			}
			q := func() *gocql.Query {
				return s.read(session.Query(s.stmts.layoutOf, chunk)).PageSize(s.cfg.PageSize)
			}
			found, err := retryLostRace(s, q, scan)
			if err != nil {
				return fmt.Errorf("cassandra: layouts of %d series: %w", len(chunk), wrapCtx(gctx, err))
			}
			mu.Lock()
			maps.Copy(layouts, found)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for id, l := range layouts {
		if info, ok := out[id]; ok {
			info.Layout = l
			out[id] = info
		}
	}
	return out, nil
}

// registryChunks groups ids by registry shard, sorted and without
// duplicates, in chunks of at most seriesLabelsChunk: what one query, IN
// over the ids of one registry partition, reads. Ids that are not UTF-8
// are left out: Cassandra would refuse the read, and no such series can
// exist.
func registryChunks(ids []string) iter.Seq2[int, []string] {
	return func(yield func(int, []string) bool) {
		var shards [seriesShards][]string
		for _, id := range ids {
			if utf8.ValidString(id) {
				shards[seriesShard(id)] = append(shards[seriesShard(id)], id)
			}
		}
		for sh, shardIDs := range shards {
			slices.Sort(shardIDs)
			for chunk := range slices.Chunk(slices.Compact(shardIDs), seriesLabelsChunk) {
				if !yield(sh, chunk) {
					return
				}
			}
		}
	}
}

// registryInfo is a registry row as LookupSeries returns it; false for a
// row without either bound (no such series).
func registryInfo(id string, first, last, gen *int64, labels map[string]string) (tiers.SeriesInfo, bool) {
	if first == nil && last == nil {
		return tiers.SeriesInfo{}, false
	}
	// Both cells are written by one batch, so one without the other is
	// only seen when a write failed half way: the other bound is then the
	// best known.
	if first == nil {
		first = last
	}
	if last == nil {
		last = first
	}
	info := tiers.SeriesInfo{ID: id, First: *first, Last: *last}
	if gen != nil {
		info.Generation = *gen
	}
	if len(labels) > 0 {
		info.Labels = labels
	}
	return info, true
}

// AppendLayout stores the entry under (series, since); entries read back
// in since order, whatever order they were appended in.
func (s *Store) AppendLayout(ctx context.Context, id string, entry tiers.LayoutEntry) error {
	if err := (tiers.Layout{entry}).Validate(); err != nil {
		return fmt.Errorf("cassandra: append layout to %q: %w", id, err)
	}
	session, err := s.sess()
	if err != nil {
		return err
	}
	err = session.Query(s.stmts.appendLayout, id, entry.Since, entry.Width, entry.EventBuckets).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("cassandra: append layout to %q: %w", id, wrapCtx(ctx, err))
	}
	return nil
}

// ListSeries reads the id range of every shard at once, labels included, each shard in
// clustering (id) order, and merges them. Each shard returns at most limit
// ids, the most the merged page can take from it, in driver pages sized for
// an even spread, so a page of the listing costs about one round trip.
func (s *Store) ListSeries(ctx context.Context, prefix, after string, limit int) ([]tiers.SeriesInfo, error) {
	if limit <= 0 {
		return nil, nil
	}
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	var where []string
	var bounds []any
	if after != "" && after >= prefix {
		where, bounds = append(where, "id > ?"), append(bounds, after)
	} else if prefix != "" {
		where, bounds = append(where, "id >= ?"), append(bounds, prefix)
	}
	if end, ok := prefixEnd(prefix); ok {
		if after >= end {
			return nil, nil
		}
		where, bounds = append(where, "id < ?"), append(bounds, end)
	}
	cql := fmt.Sprintf("SELECT id, first, last, labels FROM %s.%s WHERE shard = ?", s.cfg.Keyspace, tableSeries)
	for _, w := range where {
		cql += " AND " + w
	}
	cql += " LIMIT ?"
	pageSize := min(limit, s.cfg.PageSize, 2*limit/seriesShards+16)

	// Issue every shard's query before merging: the first page of each is
	// fetched when the query starts, and the merge needs all of them.
	inputs := make([]merge.Iterator[tiers.SeriesInfo], seriesShards)
	var g errgroup.Group
	for sh := range seriesShards {
		args := append(append([]any{sh}, bounds...), limit)
		g.Go(func() error {
			q := s.read(session.Query(cql, args...).PageSize(pageSize))
			inputs[sh] = &seriesIter{ctx: ctx, query: q, iter: q.IterContext(ctx), store: s}
			return nil
		})
	}
	_ = g.Wait()
	defer func() {
		for _, in := range inputs {
			in.(*seriesIter).iter.Close()
		}
	}()
	m := merge.Iter(func(a, b tiers.SeriesInfo) bool { return a.ID < b.ID }, inputs)
	var out []tiers.SeriesInfo
	for len(out) < limit && m.Next() {
		out = append(out, m.At())
	}
	if err := m.Err(); err != nil {
		return nil, fmt.Errorf("cassandra: list series: %w", wrapCtx(ctx, err))
	}
	return out, nil
}

// seriesIter adapts one shard's driver iterator to merge.Iterator.
type seriesIter struct {
	ctx     context.Context
	query   *gocql.Query
	iter    *gocql.Iter
	store   *Store // nil once the query was sent again without speculation
	started bool
	cur     tiers.SeriesInfo
	err     error
}

func (it *seriesIter) Next() bool {
	var first, last *int64
	var labels map[string]string
	if !it.iter.Scan(&it.cur.ID, &first, &last, &labels) {
		it.err = it.iter.Close()
		if !it.started && it.store.lostRace(it.err) {
			it.query, it.store, it.err = noSpeculation(it.query), nil, nil
			it.iter = it.query.IterContext(it.ctx)
			return it.Next()
		}
		return false
	}
	it.started = true
	it.cur.Labels = nil
	if len(labels) > 0 {
		it.cur.Labels = labels
	}
	switch {
	case first == nil && last == nil:
		// Only a generation (MarkRewritten of an id never noted) or labels
		// (SetLabels before the first NoteSeries): no series yet.
		return it.Next()
	case first == nil:
		it.cur.First, it.cur.Last = *last, *last
	case last == nil:
		it.cur.First, it.cur.Last = *first, *first
	default:
		it.cur.First, it.cur.Last = *first, *last
	}
	return true
}

func (it *seriesIter) At() tiers.SeriesInfo { return it.cur }
func (it *seriesIter) Err() error           { return it.err }

// prefixEnd returns the smallest string greater than every string that
// starts with prefix, or false when there is none (empty prefix, or only
// the largest code points). Text compares as UTF-8 bytes, which is code
// point order, and the bound must itself be valid UTF-8 for Cassandra to
// accept it: so the last code point is incremented, skipping the
// surrogates, rather than the last byte.
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		if r == utf8.RuneError && size <= 1 {
			// Not UTF-8: Cassandra would refuse the prefix itself.
			continue
		}
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r >= 0xD800 && r <= 0xDFFF {
			r = 0xE000
		}
		var b strings.Builder
		b.WriteString(prefix)
		b.WriteRune(r)
		return b.String(), true
	}
	return "", false
}
