package cassandra

import (
	"context"
	"errors"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/tiers"
)

// Block upserts the series' row of the blocked list.
func (s *Store) Block(ctx context.Context, b tiers.BlockedSeries) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	if err := session.Query(s.stmts.block, b.Series, b.Reason, b.Since).ExecContext(ctx); err != nil {
		return fmt.Errorf("cassandra: block %q: %w", b.Series, wrapCtx(ctx, err))
	}
	return nil
}

// Unblock deletes the series' row of the blocked list.
func (s *Store) Unblock(ctx context.Context, series string) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	if err := session.Query(s.stmts.unblock, series).ExecContext(ctx); err != nil {
		return fmt.Errorf("cassandra: unblock %q: %w", series, wrapCtx(ctx, err))
	}
	return nil
}

// ListBlocked reads the list's one partition, in clustering (id) order.
func (s *Store) ListBlocked(ctx context.Context) ([]tiers.BlockedSeries, error) {
	session, err := s.sess()
	if err != nil {
		return nil, err
	}
	iter := session.Query(s.stmts.listBlocked).PageSize(s.cfg.PageSize).IterContext(ctx)
	var out []tiers.BlockedSeries
	var b tiers.BlockedSeries
	for iter.Scan(&b.Series, &b.Reason, &b.Since) {
		out = append(out, b)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("cassandra: list blocked series: %w", wrapCtx(ctx, err))
	}
	return out, nil
}

// IsBlocked reads one row of the blocked list.
func (s *Store) IsBlocked(ctx context.Context, series string) (tiers.BlockedSeries, bool, error) {
	session, err := s.sess()
	if err != nil {
		return tiers.BlockedSeries{}, false, err
	}
	b := tiers.BlockedSeries{Series: series}
	err = session.Query(s.stmts.isBlocked, series).ScanContext(ctx, &b.Reason, &b.Since)
	if errors.Is(err, gocql.ErrNotFound) {
		return tiers.BlockedSeries{}, false, nil
	}
	if err != nil {
		return tiers.BlockedSeries{}, false, fmt.Errorf("cassandra: is %q blocked: %w", series, wrapCtx(ctx, err))
	}
	return b, true, nil
}
