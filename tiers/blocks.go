package tiers

import (
	"context"
	"fmt"

	"github.com/tsgate/tsgate/failure"
)

// BlockedSeries is a series refused on both paths: its reads and writes are
// answered without touching its partitions, for example while a runaway
// producer is stopped or a bad import is investigated.
type BlockedSeries struct {
	Series string
	Reason string
	// Since is when the block was set, in Unix milliseconds.
	Since int64
}

// Blocks keeps the blocked series. The list is meant to stay small (an
// operator's list, not a data set): callers read it whole and cache it.
type Blocks interface {
	// Block blocks the series, replacing the reason and time of an
	// existing block. The series need not exist.
	Block(ctx context.Context, b BlockedSeries) error
	// Unblock removes the block; unblocking a series that is not blocked
	// is not an error.
	Unblock(ctx context.Context, series string) error
	// ListBlocked returns every blocked series in ascending id order.
	ListBlocked(ctx context.Context) ([]BlockedSeries, error)
	// IsBlocked returns the block of one series, or false.
	IsBlocked(ctx context.Context, series string) (BlockedSeries, bool, error)
}

// BlockedError is the answer to a read or write of a blocked series.
type BlockedError struct {
	Block BlockedSeries
}

// Kind says a blocked series is refused as blocked.
func (e *BlockedError) Kind() failure.Kind { return failure.Blocked }

func (e *BlockedError) Error() string {
	return fmt.Sprintf("series %s is blocked: %s", e.Block.Series, e.Block.Reason)
}
