package query

// Reading many series. Every front end that reads more than one series —
// the REST batch, Grafana's targets, the Prometheus API, match and
// group_by reads — does it here, through an Engine, so that each read of
// one series still passes the engine's decorators (metrics, refusals):
// front ends translate their format into requests and render results,
// and none of them runs reads side by side, shares the points of an
// answer or follows cursors itself.

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/tsgate/tsgate/membudget"
	"github.com/tsgate/tsgate/scan"
)

// ManyConfig tunes reads of many series.
type ManyConfig struct {
	// Parallelism is how many series of one request are read at once;
	// each read also fans out over its partitions.
	Parallelism int
	// MaxResponsePoints bounds the points of one answer across all its
	// reads (0: no bound).
	MaxResponsePoints int
}

// DefaultManyConfig returns the defaults.
func DefaultManyConfig() ManyConfig {
	return ManyConfig{Parallelism: 4, MaxResponsePoints: 1_000_000}
}

// Validate checks the configuration.
func (c ManyConfig) Validate() error {
	if c.Parallelism < 1 {
		return errors.New("the series read at once must be at least 1")
	}
	if c.MaxResponsePoints < 0 {
		return errors.New("--max-response-points must not be negative")
	}
	return nil
}

// Many reads many series through an Engine.
type Many struct {
	e      Engine
	limits Limits
	cfg    ManyConfig
	// sel reads selectors (WithSelectors); nil when it cannot.
	sel *manyReadConfig
}

// NewMany returns the reader of many series through e, whose requests are
// normalised against limits.
func NewMany(e Engine, limits Limits, cfg ManyConfig) *Many {
	if cfg.Parallelism < 1 {
		cfg.Parallelism = 1
	}
	return &Many{e: e, limits: limits, cfg: cfg}
}

// Engine is the engine the reads go through, for reads of one series.
func (m *Many) Engine() Engine { return m.e }

// Share cuts the page limit of each request of one answer so that together
// they return at most MaxResponsePoints points: each gets an equal share.
// A read cut this way ends its page early with a next cursor, as any page
// that reaches its limit does, so no point is lost; the cursor does not
// depend on the limit, so it works with the limit the client asked for.
func (m *Many) Share(reqs []Request) {
	if len(reqs) == 0 || m.cfg.MaxResponsePoints <= 0 {
		return
	}
	share := max(1, m.cfg.MaxResponsePoints/len(reqs))
	for i := range reqs {
		limit := reqs[i].Limit
		if limit == 0 {
			limit = m.limits.DefaultLimit
		}
		reqs[i].Limit = min(limit, share)
	}
}

// Each answers reqs side by side, as one answer: one latency budget (each
// request's budget runs from start, the arrival of the request that asked
// for them all), the response points shared (Share), and the memory the
// answer can take reserved from the request's budget (membudget) before
// anything is read, so that many large answers queue for memory rather
// than exhaust it. visit is called once per request, at most Parallelism
// at once, with its page or the error that came instead (bad parameters,
// an unknown series, ...); Each closes the page after visit returns.
//
// Each fails, before any read, only when the memory could not be
// reserved; otherwise it returns the first error visit returned (visit
// fails when the memory it counts while rendering runs out), after every
// visit ended.
func (m *Many) Each(ctx context.Context, start time.Time, reqs []Request, visit func(i int, res Result, err error) error) error {
	m.Share(reqs)
	var expect int64
	for i := range reqs {
		reqs[i].Start = start
		expect += AnswerBytes(reqs[i], m.limits.DefaultLimit)
	}
	if err := membudget.From(ctx).Expect(ctx, expect); err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.Series
	}
	// One read of the late index and of each open bucket for the series,
	// not one each.
	ctx = scan.WithRequestSeries(ctx, ids)
	sem := make(chan struct{}, m.cfg.Parallelism)
	for i := range reqs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := m.e.Query(ctx, reqs[i])
			verr := visit(i, res, err)
			if res != nil {
				res.Close()
			}
			if verr != nil {
				mu.Lock()
				if first == nil {
					first = verr
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// All reads req to its end, page after page, following the cursors: the
// items in the read's order, or an error where a page failed (a page cut
// short of its budget is an error here, since nothing could resume it:
// the read must be complete). The head of the first page comes with every
// item's page through head, when not nil.
func (m *Many) All(ctx context.Context, req Request, head func(*Head)) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		if req.Start.IsZero() {
			req.Start = time.Now()
		}
		for page := 0; ; page++ {
			res, err := m.e.Query(ctx, req)
			if err != nil {
				yield(Item{}, err)
				return
			}
			if page == 0 && head != nil {
				head(res.Head())
			}
			for res.Next() {
				if !yield(res.Item(), nil) {
					res.Close()
					return
				}
			}
			tr := res.Trailer()
			res.Close()
			switch {
			case tr.Err != nil:
				yield(Item{}, tr.Err)
				return
			case tr.Partial:
				yield(Item{}, partialError(tr.Reason))
				return
			case tr.NextCursor == "":
				return
			}
			req.Cursor = tr.NextCursor
		}
	}
}

// partialError is a read that could not be completed.
func partialError(reason string) error {
	if reason == "slo" {
		return ErrBudget
	}
	return ErrUnavailable
}
