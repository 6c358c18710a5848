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

// sealedRowsDueShards spreads the notes over partitions, so that no
// partition of the table holds every sealed partition of an import.
const sealedRowsDueShards = 16

// sealedRowsDueSchema is the CQL of tableSealedRowsDue. A note is deleted
// (by a range delete of everything due) once its rows are; its TTL is that
// of the rows, which go by themselves then. Notes read again after a lost
// delete only delete rows again, so gc_grace can be short.
func sealedRowsDueSchema(ks string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    shard int,\n    due timestamp,\n    tbl text,\n    series text,\n    bucket timestamp,\n"+
		"    written list<bigint>,\n    PRIMARY KEY ((shard), due, tbl, series, bucket)\n) WITH CLUSTERING ORDER BY (due ASC, tbl ASC, series ASC, bucket ASC)\n"+
		"  AND gc_grace_seconds = 3600", ks, tableSealedRowsDue)
}

// sealedRowsStmts are the statements of tableSealedRowsDue.
type sealedRowsStmts struct {
	note, due, clear string
}

func newSealedRowsStmts(ks string) sealedRowsStmts {
	return sealedRowsStmts{
		note: fmt.Sprintf("INSERT INTO %s.%s (shard, due, tbl, series, bucket, written) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?", ks, tableSealedRowsDue),
		due:  fmt.Sprintf("SELECT tbl, series, bucket, written FROM %s.%s WHERE shard = ? AND due <= ?", ks, tableSealedRowsDue),
		// A range delete: one tombstone for a shard's whole run.
		clear: fmt.Sprintf("DELETE FROM %s.%s WHERE shard = ? AND due <= ?", ks, tableSealedRowsDue),
	}
}

// noteSealedRows notes that the rows of the partitions of key (one per
// entry of written, the newest write time of the rows folded in from each,
// math.MinInt64 for none) are to be deleted at due. ttl is that of the
// partitions' newest row.
func (s *Store) noteSealedRows(ctx context.Context, key tiers.PartitionKey, written []int64, due int64, ttl int) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	return session.Query(s.sealedRows.note, int(fnv1a(key.Series)%sealedRowsDueShards), due, string(key.Table), key.Series, key.Bucket, written, ttl).
		Idempotent(true).ExecContext(ctx)
}

// DeleteSealedRows deletes the rows that seals kept for their grace once
// it is over (tiers.SealedRowsDeleter) and returns how many partitions'
// rows it deleted. Each delete is a partition delete at the newest write
// time the seal folded in, so a row written since survives, as in the
// seal itself. Several gateways may run it at once.
func (s *Store) DeleteSealedRows(ctx context.Context) (int, error) {
	session, err := s.sess()
	if err != nil {
		return 0, err
	}
	now := s.now().UnixMilli()
	var deleted [sealedRowsDueShards]int
	shards, sctx := errgroup.WithContext(ctx)
	shards.SetLimit(4)
	for shard := range sealedRowsDueShards {
		shards.Go(func() error {
			deletes, dctx := errgroup.WithContext(sctx)
			deletes.SetLimit(32)
			iter := s.read(session.Query(s.sealedRows.due, shard, now)).IterContext(dctx)
			var tbl, series string
			var bucket int64
			var written []int64
			for iter.Scan(&tbl, &series, &bucket, &written) {
				cs := s.chunkStmtsOf(tiers.Table(tbl))
				if cs == nil {
					continue // a table the pyramid no longer has
				}
				deleted[shard]++
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
				return fmt.Errorf("shard %d: %w", shard, wrapCtx(sctx, err))
			}
			// Notes due by now were all read above, as new ones are due a
			// grace from now; a clock that lags that much leaves its note's
			// rows until they expire.
			return wrapCtx(sctx, session.Query(s.sealedRows.clear, shard, now).Idempotent(true).ExecContext(sctx))
		})
	}
	err = shards.Wait()
	n := 0
	for _, d := range deleted {
		n += d
	}
	if err != nil {
		return n, fmt.Errorf("cassandra: delete sealed rows: %w", err)
	}
	return n, nil
}

// chunkStmtsOf returns the chunk statements of table t, nil for a table
// that is not sealed.
func (s *Store) chunkStmtsOf(t tiers.Table) *chunkStmts {
	if t == tiers.TableRaw {
		return s.chunks
	}
	if ts, ok := s.tables[t]; ok && ts.kind == kindRollup {
		return ts.chunks
	}
	return nil
}
