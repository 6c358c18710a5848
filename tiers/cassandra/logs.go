package cassandra

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
)

// MarkLate inserts one row per (series, bucket) with a TTL that expires it
// at Bucket + Retention; marks past that are not written. The version is
// also the write timestamp (in microseconds), so that of two marks the one
// with the larger version wins whatever order they reach the replicas in:
// versions are the writers' clocks, made strictly increasing per process,
// so a mark written after a read carries a version the read has not seen
// unless its writer's clock lags the other writers' by more than the time
// between the two.
func (s *Store) MarkLate(ctx context.Context, marks []tiers.LateMark) error {
	now := s.now().UnixMilli()
	version := tiers.NewVersion()
	bySeries := map[string][]stmt{}
	for _, m := range marks {
		if m.Retention < 0 {
			return fmt.Errorf("cassandra: negative retention %d", m.Retention)
		}
		ttl, ok := rowTTL(m.Bucket, m.Retention, now)
		if !ok {
			continue
		}
		mark := s.stmts.markLate
		if m.Rewrite {
			mark = s.stmts.markRewrite
		}
		bySeries[m.Series] = append(bySeries[m.Series], stmt{mark, []any{m.Series, m.Bucket, version, ttl, version / 1000}})
	}
	groups := make([]group, 0, len(bySeries))
	for series, st := range bySeries {
		groups = append(groups, group{what: fmt.Sprintf("late marks of %q", series), stmts: st})
	}
	return s.execGroups(ctx, groups)
}

// LateBuckets reads a clustering slice of the series' marks; expired marks
// are gone by TTL. A late mark written before marks had versions (a row
// with neither version) reads as version 1, which the next mark of its
// bucket replaces.
//
// Like LookupSeries, it reads from one replica when too few answer for the
// configured consistency: the data partitions of such a read fail at that
// consistency too, so its answer is partial either way, and the marks found
// still tell which late partitions to try.
func (s *Store) LateBuckets(ctx context.Context, series string, span tiers.Span) ([]tiers.LateBucket, error) {
	if span.Empty() {
		return nil, nil
	}
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	scan := func(q *gocql.Query) ([]tiers.LateBucket, error) {
		iter := q.IterContext(ctx)
		var out []tiers.LateBucket
		var b int64
		var v, rw *int64
		for iter.Scan(&b, &v, &rw) {
			out = append(out, lateBucket(b, v, rw))
		}
		return out, iter.Close()
	}
	q := func() *gocql.Query { return s.read(session.Query(s.stmts.lateBuckets, series, span.From, span.To)) }
	out, err := retryLostRace(s, q, scan)
	if tooFewReplicas(err) {
		if weak, werr := scan(noSpeculation(q()).Consistency(s.weaker())); werr == nil {
			return weak, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cassandra: late buckets of %q: %w", series, wrapCtx(ctx, err))
	}
	return out, nil
}

// lateBucket is a late_buckets row as LateBuckets returns it.
func lateBucket(bucket int64, version, rewritten *int64) tiers.LateBucket {
	lb := tiers.LateBucket{Bucket: bucket}
	switch {
	case version != nil && *version != 0:
		lb.Version = *version
	case rewritten == nil:
		lb.Version = 1
	}
	if rewritten != nil {
		lb.Rewritten = *rewritten
	}
	return lb
}

// lateBatchSeries bounds the series of one LateBucketsOf query.
const lateBatchSeries = 100

// LateBucketsOf reads the marks of many series (tiers.LateIndexBatch):
// IN over the series' partitions, lateBatchSeries to a query, the queries
// at once. The twenty series of a dashboard panel then cost the node one
// request rather than twenty. Like LateBuckets, it reads from one replica
// when too few answer for the configured consistency.
func (s *Store) LateBucketsOf(ctx context.Context, series []string, span tiers.Span) (map[string][]tiers.LateBucket, error) {
	out := map[string][]tiers.LateBucket{}
	if span.Empty() {
		return out, nil
	}
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for chunk := range slices.Chunk(series, lateBatchSeries) {
		g.Go(func() error {
			scan := func(q *gocql.Query) (map[string][]tiers.LateBucket, error) {
				iter := q.IterContext(gctx)
				found := map[string][]tiers.LateBucket{}
				var id string
				var b int64
				var v, rw *int64
				for iter.Scan(&id, &b, &v, &rw) {
					found[id] = append(found[id], lateBucket(b, v, rw))
				}
				return found, iter.Close()
			}
			q := func() *gocql.Query {
				return s.read(session.Query(s.stmts.lateBucketsOf, chunk, span.From, span.To)).PageSize(s.cfg.PageSize)
			}
			found, err := retryLostRace(s, q, scan)
			if tooFewReplicas(err) {
				if weak, werr := scan(noSpeculation(q()).Consistency(s.weaker())); werr == nil {
					found, err = weak, nil
				}
			}
			if err != nil {
				return fmt.Errorf("cassandra: late buckets of %d series: %w", len(chunk), wrapCtx(gctx, err))
			}
			mu.Lock()
			defer mu.Unlock()
			for id, marks := range found {
				// Rows come partition by partition, each in bucket order.
				out[id] = append(out[id], marks...)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Names of the rollup_state cells. Checkpoints get a prefix so that no
// checkpoint name can collide with the oldest-slot cell.
const (
	stateOldestDirtySlot  = "oldest_dirty_slot"
	stateCheckpointPrefix = "checkpoint:"
)

// MarkDirty files the windows under (slot, shard of the series), each row
// expiring retention after it is written, and lowers the oldest-slot cell
// to slot through its write timestamp (see minWinsStamp).
func (s *Store) MarkDirty(ctx context.Context, slot, retention int64, windows []tiers.DirtyWindow) error {
	if retention < 0 {
		return fmt.Errorf("cassandra: negative retention %d", retention)
	}
	ttl := int(retentionTTL(retention))
	var shards [dirtyShards][]stmt
	for _, w := range windows {
		sh := dirtyShard(w.Series)
		shards[sh] = append(shards[sh], stmt{s.stmts.markDirty, []any{slot, sh, w.Series, w.Window, ttl}})
	}
	var groups []group
	for sh, st := range shards {
		if len(st) > 0 {
			groups = append(groups, group{what: fmt.Sprintf("rollup log slot %d shard %d", slot, sh), stmts: st})
		}
	}
	// A slot this process already recorded, or a later one, cannot lower
	// the stored minimum: skip the write.
	noteOldest := slot < s.oldestNoted.Load()
	if noteOldest {
		groups = append(groups, group{what: "oldest dirty slot", stmts: []stmt{
			{s.stmts.setState, []any{minWinsStamp(slot), slot, stateOldestDirtySlot}},
		}})
	}
	if err := s.execGroups(ctx, groups); err != nil {
		return err
	}
	if noteOldest {
		for {
			cur := s.oldestNoted.Load()
			if slot >= cur || s.oldestNoted.CompareAndSwap(cur, slot) {
				break
			}
		}
	}
	return nil
}

// DirtyWindows reads the slot's shards at once. Rows are unique per
// (series, window) within a shard, and a series lives in one shard, so
// every window comes once.
func (s *Store) DirtyWindows(ctx context.Context, slot int64) ([]tiers.DirtyWindow, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	var parts [dirtyShards][]tiers.DirtyWindow
	g, gctx := errgroup.WithContext(ctx)
	for sh := range dirtyShards {
		g.Go(func() error {
			scan := func(q *gocql.Query) ([]tiers.DirtyWindow, error) {
				iter := q.IterContext(gctx)
				var out []tiers.DirtyWindow
				var w tiers.DirtyWindow
				for iter.Scan(&w.Series, &w.Window) {
					out = append(out, w)
				}
				return out, iter.Close()
			}
			q := func() *gocql.Query { return s.read(session.Query(s.stmts.dirtyWindows, slot, sh)) }
			rows, err := retryLostRace(s, q, scan)
			if err != nil {
				return fmt.Errorf("cassandra: rollup log slot %d shard %d: %w", slot, sh, wrapCtx(gctx, err))
			}
			parts[sh] = rows
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []tiers.DirtyWindow
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// OldestDirtySlot reads the cell MarkDirty keeps at the smallest slot.
func (s *Store) OldestDirtySlot(ctx context.Context) (int64, bool, error) {
	return s.getState(ctx, stateOldestDirtySlot)
}

// Checkpoint reads the named checkpoint.
func (s *Store) Checkpoint(ctx context.Context, name string) (int64, bool, error) {
	return s.getState(ctx, stateCheckpointPrefix+name)
}

// AdvanceCheckpoint writes the value with a write timestamp that grows with
// it (see maxWinsStamp): the largest value ever written wins, whatever the
// order, so concurrent workers never move the checkpoint back.
func (s *Store) AdvanceCheckpoint(ctx context.Context, name string, to int64) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	err = session.Query(s.stmts.setState, maxWinsStamp(to), to, stateCheckpointPrefix+name).ExecContext(ctx)
	if err != nil {
		return fmt.Errorf("cassandra: advance checkpoint %q: %w", name, wrapCtx(ctx, err))
	}
	return nil
}

func (s *Store) getState(ctx context.Context, name string) (int64, bool, error) {
	session, err := s.sess()
	if err != nil {
		return 0, false, err
	}
	var v *int64
	err = s.readOne(ctx, func() *gocql.Query { return session.Query(s.stmts.getState, name) }, &v)
	if errors.Is(err, gocql.ErrNotFound) || (err == nil && v == nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cassandra: read %s: %w", name, wrapCtx(ctx, err))
	}
	return *v, true, nil
}

// Secret reads the named secret and, when it is missing, inserts a
// generated one with a lightweight transaction (INSERT ... IF NOT EXISTS):
// of racing instances exactly one insert applies, and the others get the
// stored value back from their failed condition.
func (s *Store) Secret(ctx context.Context, name string, generate func() ([]byte, error)) ([]byte, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	return s.metaValue(ctx, session, "secret", name, generate)
}

// metaValue is the value of the named meta row, which it inserts from
// generate when the row is missing, as Secret describes; what names the
// value in errors.
func (s *Store) metaValue(ctx context.Context, session *gocql.Session, what, name string, generate func() ([]byte, error)) ([]byte, error) {
	if v, ok, err := s.readMeta(ctx, session, what, name); err != nil || ok {
		return v, err
	}
	v, err := generate()
	if err != nil {
		return nil, fmt.Errorf("cassandra: generate %s %q: %w", what, name, err)
	}
	existing := map[string]any{}
	applied, err := session.Query(s.stmts.putMeta, name, v).MapScanCASContext(ctx, existing)
	if err != nil {
		// The transaction's outcome may be unknown (a timeout after the
		// proposal): whatever is stored now is the answer.
		if stored, ok, rerr := s.readMeta(ctx, session, what, name); rerr == nil && ok {
			return stored, nil
		}
		return nil, fmt.Errorf("cassandra: store %s %q: %w", what, name, wrapCtx(ctx, err))
	}
	if applied {
		return v, nil
	}
	stored, ok := existing["value"].([]byte)
	if !ok || stored == nil {
		return nil, fmt.Errorf("cassandra: %s %q exists but its value could not be read back", what, name)
	}
	return stored, nil
}

// readMeta reads at SERIAL (or LOCAL_SERIAL) consistency, so that a value
// some instance's transaction is committing is seen, not missed.
func (s *Store) readMeta(ctx context.Context, session *gocql.Session, what, name string) ([]byte, bool, error) {
	var v []byte
	err := session.Query(s.stmts.getMeta, name).Consistency(s.serial).ScanContext(ctx, &v)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cassandra: read %s %q: %w", what, name, wrapCtx(ctx, err))
	}
	return v, true, nil
}

// metaMarksSince names the meta row of Store.marksSince.
const metaMarksSince = "chunk_marks_since"

// metaTime returns the time kept in the named meta row, storing the
// store's now there first when the row is missing (metaValue).
func (s *Store) metaTime(ctx context.Context, session *gocql.Session, name string) (int64, error) {
	v, err := s.metaValue(ctx, session, "meta time", name, func() ([]byte, error) {
		return binary.BigEndian.AppendUint64(nil, uint64(s.now().UnixMilli())), nil
	})
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("cassandra: meta %q holds %d bytes, not a time", name, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
