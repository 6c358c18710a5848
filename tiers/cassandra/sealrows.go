package cassandra

import (
	"context"
	"fmt"
	"math"

	"golang.org/x/sync/errgroup"

	"github.com/tsgate/tsgate/tiers"
)

// A seal keeps a partition's rows for SealedRowsGrace after it writes its
// chunks, so that a read that asked for the chunks before they were
// written still finds the rows. When the seal cannot delete them yet it
// notes the partition in tableSealedRowsDue, with the newest write time
// of the rows it folded in from each partition, and DeleteSealedRows
// deletes them once the grace is over — without reading a row again, and
// whether or not a seal ever comes back to the partition (`gateway import`
// seals history far behind the worker's checkpoint).
const tableSealedRowsDue = "sealed_rows_due"

// sealedRowsDueShards spreads a day's notes over partitions, so that no
// partition holds every sealed partition of an import.
const sealedRowsDueShards = 16

// sealedRowsHorizon is the longest a note is kept, and how far back a
// store that never deleted sealed rows looks for notes: rows noted longer
// ago than that stay until they expire, read beside their chunks.
const sealedRowsHorizon = 30 * tiers.Day

// sealedRowsCheckpoint is the checkpoint (rollup_state) up to which every
// note due has been done.
const sealedRowsCheckpoint = "sealed_rows"

// sealedRowsDueSchema is the CQL of tableSealedRowsDue: notes partitioned
// by the day they are due and a shard. A run reads each partition from
// the last run's end on, and deletes what it did with one range delete, so
// that the tombstones of earlier runs are never read again. Notes read
// again after a lost delete only delete rows again, so gc_grace can be
// short.
func sealedRowsDueSchema(ks string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    day int,\n    shard int,\n    due timestamp,\n    tbl text,\n    series text,\n"+
		"    bucket timestamp,\n    written list<bigint>,\n    PRIMARY KEY ((day, shard), due, tbl, series, bucket)\n"+
		") WITH CLUSTERING ORDER BY (due ASC, tbl ASC, series ASC, bucket ASC)\n  AND gc_grace_seconds = 3600", ks, tableSealedRowsDue)
}

// sealedRowsStmts are the statements of tableSealedRowsDue.
type sealedRowsStmts struct {
	note, due, clear string
}

func newSealedRowsStmts(ks string) sealedRowsStmts {
	return sealedRowsStmts{
		note: fmt.Sprintf("INSERT INTO %s.%s (day, shard, due, tbl, series, bucket, written) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?", ks, tableSealedRowsDue),
		due:  fmt.Sprintf("SELECT tbl, series, bucket, written FROM %s.%s WHERE day = ? AND shard = ? AND due > ? AND due <= ?", ks, tableSealedRowsDue),
		// A range delete: one tombstone for what a run did in a partition.
		clear: fmt.Sprintf("DELETE FROM %s.%s WHERE day = ? AND shard = ? AND due > ? AND due <= ?", ks, tableSealedRowsDue),
	}
}

func dueDay(t int64) int { return int(tiers.AlignDown(t, tiers.Day) / tiers.Day) }

// noteSealedRows notes that the rows of the partitions of key (one per
// entry of written, the newest write time of the rows folded in from each,
// math.MinInt64 for none) are to be deleted at due. ttl is that of the
// partitions' newest row (0: none).
func (s *Store) noteSealedRows(ctx context.Context, key tiers.PartitionKey, written []int64, due int64, ttl int) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	horizon := int(sealedRowsHorizon / 1000)
	if ttl == 0 || ttl > horizon {
		ttl = horizon
	}
	return session.Query(s.sealedRows.note, dueDay(due), int(fnv1a(key.Series)%sealedRowsDueShards), due, string(key.Table), key.Series, key.Bucket, written, ttl).
		Idempotent(true).ExecContext(ctx)
}

// DeleteSealedRows deletes the rows that seals kept for their grace once
// it is over (tiers.SealedRowsDeleter) and returns how many partitions'
// rows it deleted: those of the notes due since the last run (the last
// sealedRowsHorizon when none ran). Each delete is a partition delete at
// the newest write time the seal folded in, so a row written since
// survives, as in the seal itself. Several gateways may run it at once.
func (s *Store) DeleteSealedRows(ctx context.Context) (int, error) {
	session, err := s.sess()
	if err != nil {
		return 0, err
	}
	now := s.now().UnixMilli()
	from, ok, err := s.Checkpoint(ctx, sealedRowsCheckpoint)
	if err != nil {
		return 0, fmt.Errorf("cassandra: delete sealed rows: %w", err)
	}
	if !ok || from < now-sealedRowsHorizon {
		from = now - sealedRowsHorizon
	}
	if from >= now {
		return 0, nil
	}
	type part struct{ day, shard int }
	var parts []part
	for day := dueDay(from); day <= dueDay(now); day++ {
		for shard := range sealedRowsDueShards {
			parts = append(parts, part{day, shard})
		}
	}
	deleted := make([]int, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, pt := range parts {
		g.Go(func() error {
			deletes, dctx := errgroup.WithContext(gctx)
			deletes.SetLimit(32)
			iter := s.read(session.Query(s.sealedRows.due, pt.day, pt.shard, from, now)).IterContext(dctx)
			var tbl, series string
			var bucket int64
			var written []int64
			for iter.Scan(&tbl, &series, &bucket, &written) {
				deleted[i]++
				cs := s.chunkStmtsOf(tiers.Table(tbl))
				if cs == nil {
					continue // a table the pyramid no longer has
				}
				for eb, wt := range written {
					if wt == math.MinInt64 {
						continue
					}
					args := []any{wt, series, bucket}
					if !cs.rollup {
						args = append(args, int16(eb))
					}
					deletes.Go(func() error {
						return session.Query(cs.deleteRows, args...).Idempotent(true).ExecContext(dctx)
					})
				}
				written = nil // a list of its own for the next row
			}
			err := iter.Close()
			if werr := deletes.Wait(); err == nil {
				err = werr
			}
			if err != nil {
				return fmt.Errorf("day %d shard %d: %w", pt.day, pt.shard, wrapCtx(gctx, err))
			}
			if deleted[i] == 0 {
				return nil // no tombstone for nothing
			}
			return wrapCtx(gctx, session.Query(s.sealedRows.clear, pt.day, pt.shard, from, now).Idempotent(true).ExecContext(gctx))
		})
	}
	err = g.Wait()
	n := 0
	for _, d := range deleted {
		n += d
	}
	if err == nil {
		// Notes due by now were all read above, as new ones are due a
		// grace from now; a clock that lags that much leaves its note's
		// rows until they expire.
		err = s.AdvanceCheckpoint(ctx, sealedRowsCheckpoint, now)
	}
	if err != nil {
		return n, fmt.Errorf("cassandra: delete sealed rows: %w", err)
	}
	return n, nil
}

// chunkStmtsOf returns the chunk statements of table t, nil for a table
// that is not sealed.
func (s *Store) chunkStmtsOf(t tiers.Table) *chunkStmts {
	if ts, ok := s.tables[t]; ok {
		return ts.chunks // nil for the late table
	}
	return nil
}
