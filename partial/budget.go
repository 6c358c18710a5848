package partial

import (
	"context"
	"errors"
	"time"

	"github.com/tsgate/tsgate/failure"
)

// ErrBudgetExceeded is the cause of a read's context when its latency budget
// ran out.
var ErrBudgetExceeded = failure.New(failure.BudgetExceeded, "latency budget exhausted")

// WithBudget returns a context that is done when slo has elapsed since
// start, with ErrBudgetExceeded as its cause. The budget covers everything
// the request does from then on: enumeration, fan-out, merge and encoding.
func WithBudget(ctx context.Context, start time.Time, slo time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadlineCause(ctx, start.Add(slo), ErrBudgetExceeded)
}

// Reason classifies why a read stopped early, for the partial_reason member:
// "slo" when the budget ran out, "unavailable" when the store failed. It
// returns "" for a nil error.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBudgetExceeded):
		return "slo"
	default:
		return "unavailable"
	}
}
