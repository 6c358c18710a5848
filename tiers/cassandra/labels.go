package cassandra

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/merge"
	"github.com/tsgate/tsgate/tiers"
)

// The label index is three tables and two columns of the registry:
//
//	series          ((shard), id) → labels frozen<map<text, text>>, labels_pending blob
//	label_postings  ((name, value, shard), series)   shard = the series' registry shard
//	label_values    ((name, shard), value)           shard = FNV-1a of the value mod 16
//	label_names     ((shard), name)                  shard = FNV-1a of the name mod 4
//
// A listing of the index reads every shard of its table at once and merges
// them (merge.Iter), as the registry listing does. Schema says how large
// each partition grows.
const (
	tableLabelPostings = "label_postings"
	tableLabelValues   = "label_values"
	tableLabelNames    = "label_names"
)

// Shard counts of the label index; like seriesShards they are part of the
// on-disk format (TestShardsAreStable pins them). A posting's shard is its
// series' registry shard, so postings split exactly as the registry does.
const (
	valueShards = 16
	nameShards  = 4
)

func postingShard(id string) int  { return seriesShard(id) }
func valueShard(value string) int { return int(fnv1a(value) % valueShards) }
func nameShard(name string) int   { return int(fnv1a(name) % nameShards) }

// labelReads bounds the reads one SeriesLabels call keeps in flight.
const labelReads = 32

// seriesLabelsChunk is the most ids one registry read asks for (IN over
// clustering keys of one partition, which Cassandra reads in one pass).
const seriesLabelsChunk = 100

// indexStamp is the write timestamp (microseconds) of an index write, from
// the process' clock that never goes back (tiers.NewVersion): of two
// writes of one cell made one after the other, the later wins.
func indexStamp() int64 { return tiers.NewVersion() / 1000 }

// SetLabels writes in four steps, each acknowledged before the next:
//
//  1. read the series' labels and pending pairs (see below);
//  2. the postings of every pair of labels;
//  3. the value entries of every pair, and the labels record;
//  4. the name entries, and the deletion of the lost pairs' postings;
//
// then removes the value and name entries no series needs any more. Every
// call writes the entries of all its pairs, not only of those it gains, so
// that calling again completes a call that failed part way. The pairs a
// call loses are kept in the record's labels_pending until their postings
// and entries are gone: a call that failed after writing the record, or
// after a later call replaced it, still finds them.
//
// # Removing entries
//
// A value entry is deleted once no posting of its pair is left, a name
// entry once no value entry of its name is left. Each check reads every
// shard, and the delete that follows carries a write timestamp taken
// before the check began. A writer that adds the pair meanwhile writes
// its posting before its value entry (its value entry before its name
// entry), each acknowledged before the next: either the posting (value
// entry) was there for the check to see, and nothing is deleted, or the
// value entry (name entry) was written after the check began, with a later
// timestamp than the delete, and survives it in whatever order the two
// reach the replicas. Two calls that remove the last postings of a pair
// each check after their own delete, so the later check finds none.
//
// The safe side is taken where clocks disagree: a value entry written
// moments before the check, by a gateway whose clock runs ahead, outlives
// the delete and stays listed with no series, which is harmless; the
// other way round, a gateway whose clock lags the deleting one's by more
// than the time between the check and its own write could lose the entry
// of a value it has just given a series. The index shares that bound with
// every last-write-wins cell of the store; postings, which decide whether
// a series is found, are only ever deleted by their own series' calls.
func (s *Store) SetLabels(ctx context.Context, id string, labels tiers.Labels) error {
	if err := labels.CheckStorable(); err != nil {
		return fmt.Errorf("cassandra: labels of %q: %w", id, err)
	}
	labels = labels.Stored()
	session, err := s.sess()
	if err != nil {
		return err
	}
	// 1. The series' labels, and the pairs earlier calls lost and did not
	// finish removing: all of them that labels lacks are lost now.
	sh := seriesShard(id)
	var cur map[string]string
	var pendingBlob []byte
	err = s.readOne(ctx, func() *gocql.Query { return session.Query(s.stmts.readLabels, sh, id) }, &cur, &pendingBlob)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("cassandra: labels of %q: %w", id, wrapCtx(ctx, err))
	}
	pending, ok := decodePairs(pendingBlob)
	if !ok {
		return fmt.Errorf("cassandra: corrupt pending labels of %q", id)
	}
	_, lost := tiers.Diff(cur, labels)
	for _, p := range pending {
		if v, ok := labels[p.Name]; (!ok || v != p.Value) && !slices.Contains(lost, p) {
			lost = append(lost, p)
		}
	}
	if len(labels) == 0 && len(cur) == 0 && len(pending) == 0 {
		return nil
	}
	names := labels.Names()
	ps := postingShard(id)

	// 2. The postings.
	ts := indexStamp()
	batch := make([]stmt, 0, len(names)+1)
	for _, n := range names {
		batch = append(batch, stmt{s.stmts.addPosting, []any{n, labels[n], ps, id, ts}})
	}
	if err := s.execIndex(ctx, "postings of "+id, batch); err != nil {
		return err
	}

	// 3. Value entries and the record.
	batch, ts = batch[:0], indexStamp()
	for _, n := range names {
		batch = append(batch, stmt{s.stmts.addValue, []any{n, valueShard(labels[n]), labels[n], ts}})
	}
	switch {
	case len(lost) > 0 || len(pending) > 0:
		batch = append(batch, stmt{s.stmts.setLabelsPending, []any{ts, map[string]string(labels), encodePairs(lost), sh, id}})
	case !labels.Equal(cur):
		batch = append(batch, stmt{s.stmts.setLabels, []any{ts, map[string]string(labels), sh, id}})
	}
	if err := s.execIndex(ctx, "label values and labels of "+id, batch); err != nil {
		return err
	}

	// 4. Name entries and the lost postings.
	batch, ts = batch[:0], indexStamp()
	for _, n := range names {
		batch = append(batch, stmt{s.stmts.addName, []any{nameShard(n), n, ts}})
	}
	for _, l := range lost {
		batch = append(batch, stmt{s.stmts.delPosting, []any{ts, l.Name, l.Value, ps, id}})
	}
	if err := s.execIndex(ctx, "label names and lost postings of "+id, batch); err != nil {
		return err
	}
	if len(lost) == 0 {
		return nil
	}
	if err := s.removeUnused(ctx, session, lost, labels); err != nil {
		return fmt.Errorf("cassandra: labels of %q: %w", id, err)
	}
	err = session.Query(s.stmts.clearPending, indexStamp(), sh, id).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("cassandra: labels of %q: clear pending pairs: %w", id, wrapCtx(ctx, err))
	}
	return nil
}

// maxIndexBatch is the most statements of one index write request:
// Cassandra warns of unlogged batches across more partitions than 10
// (unlogged_batch_across_partitions_warn_threshold).
const maxIndexBatch = 10

// execIndex writes the statements of one step of SetLabels as UNLOGGED
// batches of at most maxIndexBatch, all at once. Unlike the data writes
// (execGroups), a batch spans partitions: a step is a handful of one-row
// partitions, and a request per row costs the client and the node more
// than the coordinator's fan-out of a few rows does (loading 15,000
// series of 5 labels on one node, CPU per series fell from 1.6 to 1.0 ms
// on the node and from 0.8 to 0.4 ms in the gateway). The rows carry
// their write timestamps, so a batch applied twice stores the same.
func (s *Store) execIndex(ctx context.Context, what string, stmts []stmt) error {
	if len(stmts) == 0 {
		return nil
	}
	if len(stmts) <= maxIndexBatch {
		if err := s.execBatch(ctx, stmts); err != nil {
			return fmt.Errorf("cassandra: write %s: %w", what, wrapCtx(ctx, err))
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	for chunk := range slices.Chunk(stmts, maxIndexBatch) {
		g.Go(func() error { return s.execBatch(gctx, chunk) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("cassandra: write %s: %w", what, wrapCtx(ctx, err))
	}
	return nil
}

// removeUnused deletes the value entries of the lost pairs that no series
// holds any more, then the name entries of the names left without values
// (see SetLabels). Names that labels keeps have a value: they stay.
func (s *Store) removeUnused(ctx context.Context, session *gocql.Session, lost []tiers.Label, labels tiers.Labels) error {
	unused := make([]bool, len(lost))
	g, gctx := errgroup.WithContext(ctx)
	for i, l := range lost {
		g.Go(func() error {
			ts := indexStamp() - 1 // before the check: see SetLabels
			held, err := s.anyRow(gctx, seriesShards, func(sh int) *gocql.Query {
				return session.Query(s.stmts.anyPosting, l.Name, l.Value, sh)
			})
			if err != nil || held {
				return err
			}
			unused[i] = true
			err = session.Query(s.stmts.delValue, ts, l.Name, valueShard(l.Value), l.Value).Idempotent(true).ExecContext(gctx)
			if err != nil {
				return fmt.Errorf("delete label value %s=%q: %w", l.Name, l.Value, wrapCtx(gctx, err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var names []string
	for i, l := range lost {
		if _, kept := labels[l.Name]; unused[i] && !kept && !slices.Contains(names, l.Name) {
			names = append(names, l.Name)
		}
	}
	g, gctx = errgroup.WithContext(ctx)
	for _, n := range names {
		g.Go(func() error {
			ts := indexStamp() - 1
			named, err := s.anyRow(gctx, valueShards, func(sh int) *gocql.Query {
				return session.Query(s.stmts.anyValue, n, sh)
			})
			if err != nil || named {
				return err
			}
			err = session.Query(s.stmts.delName, ts, nameShard(n), n).Idempotent(true).ExecContext(gctx)
			if err != nil {
				return fmt.Errorf("delete label name %s: %w", n, wrapCtx(gctx, err))
			}
			return nil
		})
	}
	return g.Wait()
}

// anyRow reports whether any of the shards' queries (each LIMIT 1) finds a
// row, reading every shard at once.
func (s *Store) anyRow(ctx context.Context, shards int, q func(sh int) *gocql.Query) (bool, error) {
	found := make([]bool, shards)
	g, gctx := errgroup.WithContext(ctx)
	for sh := range shards {
		g.Go(func() error {
			var v string
			err := s.readOne(gctx, func() *gocql.Query { return q(sh) }, &v)
			switch {
			case errors.Is(err, gocql.ErrNotFound):
				return nil
			case err != nil:
				return wrapCtx(gctx, err)
			}
			found[sh] = true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	return slices.Contains(found, true), nil
}

// SeriesLabels reads the labels column of the registry: the ids of one
// registry shard at most seriesLabelsChunk to a query (IN over the
// clustering key: one partition, one pass), every query at once up to
// labelReads.
func (s *Store) SeriesLabels(ctx context.Context, ids []string) (map[string]tiers.Labels, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	out := make(map[string]tiers.Labels)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(labelReads)
	for sh, chunk := range registryChunks(ids) {
		g.Go(func() error {
			scan := func(q *gocql.Query) (map[string]tiers.Labels, error) {
				iter := q.IterContext(gctx)
				found := make(map[string]tiers.Labels, len(chunk))
				var id string
				var l map[string]string
				for iter.Scan(&id, &l) {
					if len(l) > 0 {
						found[id] = l
					}
					l = nil
				}
				return found, iter.Close()
			}
			q := func() *gocql.Query { return s.read(session.Query(s.stmts.seriesLabels, sh, chunk)) }
			found, err := retryLostRace(s, q, scan)
			if err != nil {
				return fmt.Errorf("cassandra: labels of %d series of registry shard %d: %w", len(chunk), sh, wrapCtx(gctx, err))
			}
			mu.Lock()
			maps.Copy(out, found)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Postings reads the pair's postings from every shard and merges them:
// each shard is in series order (clustering), and a series is in one
// shard only.
func (s *Store) Postings(ctx context.Context, name, value string) ([]string, error) {
	if (tiers.Labels{name: value}).CheckStorable() != nil || value == "" {
		return nil, nil // no series can have it
	}
	out, err := s.mergeShards(ctx, seriesShards, func(session *gocql.Session, shards []int) *gocql.Query {
		return session.Query(s.stmts.postings, name, value, shards)
	})
	if err != nil {
		return nil, fmt.Errorf("cassandra: postings of %s=%q: %w", name, value, err)
	}
	return out, nil
}

// LabelValues merges the value shards of the name.
func (s *Store) LabelValues(ctx context.Context, name string) ([]string, error) {
	if (tiers.Labels{name: ""}).CheckStorable() != nil {
		return nil, nil
	}
	out, err := s.mergeShards(ctx, valueShards, func(session *gocql.Session, shards []int) *gocql.Query {
		return session.Query(s.stmts.values, name, shards)
	})
	if err != nil {
		return nil, fmt.Errorf("cassandra: values of label %s: %w", name, err)
	}
	return out, nil
}

// LabelNames merges the name shards.
func (s *Store) LabelNames(ctx context.Context) ([]string, error) {
	out, err := s.mergeShards(ctx, nameShards, func(session *gocql.Session, shards []int) *gocql.Query {
		return session.Query(s.stmts.names, shards)
	})
	if err != nil {
		return nil, fmt.Errorf("cassandra: label names: %w", err)
	}
	return out, nil
}

// mergeShards reads the text column of the partitions of shards 0 to
// shards-1, each in clustering order, and merges them without duplicates.
// It reads them with one query, IN over the shards: every selector asks
// for postings, and one query each rather than sixteen was a tenth of
// what a node spent on reading twenty series' last hour. The query's
// rows come partition by partition, each partition's in order, with the
// shard on each row to tell where one partition ends.
func (s *Store) mergeShards(ctx context.Context, shards int, q func(*gocql.Session, []int) *gocql.Query) ([]string, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	all := make([]int, shards)
	for i := range all {
		all[i] = i
	}
	scan := func(q *gocql.Query) ([][]string, error) {
		iter := q.IterContext(ctx)
		var runs [][]string
		var sh, last int
		var v string
		for iter.Scan(&sh, &v) {
			if len(runs) == 0 || sh != last {
				runs = append(runs, nil)
				last = sh
			}
			runs[len(runs)-1] = append(runs[len(runs)-1], v)
		}
		return runs, iter.Close()
	}
	runs, err := retryLostRace(s, func() *gocql.Query { return s.read(q(session, all).PageSize(s.cfg.PageSize)) }, scan)
	if err != nil {
		return nil, wrapCtx(ctx, err)
	}
	parts := make([]merge.Iterator[string], len(runs))
	for i, run := range runs {
		parts[i] = merge.FromSlice(run)
	}
	return merge.Collect(merge.Iter(func(a, b string) bool { return a < b }, parts, merge.Dedup()))
}

// encodePairs encodes the pending pairs of a labels record: each name and
// value preceded by its length as a uvarint. nil for none (a null cell).
func encodePairs(pairs []tiers.Label) []byte {
	var b []byte
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(len(p.Name)))
		b = append(b, p.Name...)
		b = binary.AppendUvarint(b, uint64(len(p.Value)))
		b = append(b, p.Value...)
	}
	return b
}

// decodePairs is encodePairs' inverse.
func decodePairs(b []byte) ([]tiers.Label, bool) {
	var out []tiers.Label
	for len(b) > 0 {
		var field [2]string
		for i := range field {
			n, w := binary.Uvarint(b)
			if w <= 0 || n > uint64(len(b)-w) {
				return nil, false
			}
			field[i], b = string(b[w:w+int(n)]), b[w+int(n):]
		}
		out = append(out, tiers.Label{Name: field[0], Value: field[1]})
	}
	return out, true
}
