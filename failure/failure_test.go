package failure

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("x")
	for _, c := range []struct {
		err  error
		want Kind
	}{
		{base, Internal},
		{Mark(base, NotFound), NotFound},
		{fmt.Errorf("wrapped: %w", Mark(base, Unavailable)), Unavailable},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), BudgetExceeded},
		{context.Canceled, Canceled},
		{New(Overloaded, "busy"), Overloaded},
		// Several kinds: the most specific wins, whatever the nesting.
		{fmt.Errorf("%w: lookup: %w", New(Unavailable, "store"), Mark(base, Blocked)), Blocked},
		{Mark(Mark(base, BadInput), Unavailable), BadInput},
		{errors.Join(New(Unavailable, "a"), New(NotFound, "b")), NotFound},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if !errors.Is(Mark(base, NotFound), base) {
		t.Error("Mark hides the error it marks")
	}
	if Mark(nil, NotFound) != nil {
		t.Error("Mark(nil) is not nil")
	}
	for _, k := range Kinds {
		if k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
}
