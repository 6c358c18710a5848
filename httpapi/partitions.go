package httpapi

import (
	"context"
	"fmt"

	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
	"github.com/tsgate/tsgate/tiers"
)

// checkPartitions refuses a read whose page would plan more than
// --max-partitions partitions, before any of them is read: such a read
// (a year of raw points, say) would tie up the store for long and most
// likely end partial anyway. The problem names resolution, with the
// number planned and the finest tier step that fits, or from when none
// does. GET /plan shows the count and never fails for it.
func (s *Server) checkPartitions(ctx context.Context, req query.Request) error {
	max := s.cfg.Limits.MaxPartitions
	if max <= 0 || s.deps.Engine == nil {
		return nil
	}
	n, plan, err := s.plannedPartitions(ctx, req)
	if err != nil || n <= max {
		return nil // the read itself reports what is wrong with it
	}
	s.deps.Metrics.refuse(refusedPartitions)
	p := &s.deps.Pyramid
	for _, l := range p.Levels() {
		step := p.Tier(l).Step
		if step <= plan.Step {
			continue
		}
		alt := req
		alt.Cursor, alt.MaxPoints = "", 0
		alt.Resolution = router.Resolution{Kind: router.Window, Window: step}
		if m, _, err := s.plannedPartitions(ctx, alt); err == nil && m <= max {
			return badParam("resolution", fmt.Sprintf("the read plans %d partitions, more than %d (--max-partitions); resolution=%s plans %d", n, max, tiers.FormatDuration(step), m))
		}
	}
	return badParam("from", fmt.Sprintf("the read plans %d partitions, more than %d (--max-partitions) even at the coarsest resolution; narrow the range", n, max))
}

func (s *Server) plannedPartitions(ctx context.Context, req query.Request) (int, router.Plan, error) {
	ex, err := s.deps.Engine.Explain(ctx, req)
	if err != nil {
		return 0, router.Plan{}, err
	}
	n := 0
	for pb := range ex.Buckets {
		n += pb.Partitions
	}
	return n, ex.Plan, nil
}
