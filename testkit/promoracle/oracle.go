// Package promoracle proves PromQL answers against Prometheus itself: the
// same deterministic samples go by remote write to a Prometheus server
// (the reference) and to the server under test (the gateway), then a
// broad list of PromQL expressions is asked of both, as instant queries
// at several times and as range queries, with the metadata endpoints,
// and every answer must be the same: the same series (label sets), the
// same timestamps, values equal to float precision.
//
// It is test support: the integration tests run it against the gateway
// on Cassandra (integration/prom_oracle_test.go); its own tests check the
// pieces that need no server, and have a Prometheus server scrape the
// gateway on the embedded store. docs/prometheus.md tells how to run it.
package promoracle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
)

// Mismatch is one question whose answers differ.
type Mismatch struct {
	// Question is the query and where it was asked.
	Question string
	Diffs    []string
}

// Report is the outcome of asking both targets everything.
type Report struct {
	Reference, Subject string
	// Questions is how many questions were asked of each; Agreed how
	// many were answered alike; Values how many values (samples and
	// points) the reference's answers held.
	Questions, Agreed, Values int
	Mismatches                []Mismatch
	// Broken are questions the reference refused, and cases that found
	// nothing on the reference though they should: the case list is
	// wrong, whatever the subject answers.
	Broken []string
}

// Failed tells whether anything disagreed or the case list is broken.
func (r *Report) Failed() bool { return len(r.Mismatches) > 0 || len(r.Broken) > 0 }

// String is a summary and the first differences.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s agreed with %s on %d of %d questions (the reference's answers held %d values)",
		r.Subject, r.Reference, r.Agreed, r.Questions, r.Values)
	if len(r.Broken) > 0 {
		fmt.Fprintf(&b, "\n%d broken cases (the reference refused them or found nothing):", len(r.Broken))
		for _, s := range r.Broken {
			fmt.Fprintf(&b, "\n  %s", s)
		}
	}
	const shown = 40
	for i, m := range r.Mismatches {
		if i == shown {
			fmt.Fprintf(&b, "\n... and %d more questions answered differently", len(r.Mismatches)-shown)
			break
		}
		fmt.Fprintf(&b, "\n%s:", m.Question)
		for _, d := range m.Diffs {
			fmt.Fprintf(&b, "\n    %s", d)
		}
	}
	return b.String()
}

// Parallelism is how many questions are in flight at once.
var Parallelism = 4

// question is one query of a case, asked of either target.
type question struct {
	caseIndex int
	text      string
	order     Order
	ask       func(ctx context.Context, t *Target) (model.Value, error)
}

// Compare asks ref and subject every case of the set at every instant
// and over every range, and every metadata question, and reports how the
// subject's answers differ from the reference's.
func Compare(ctx context.Context, ref, subject *Target, s *Set) *Report {
	cases := s.Cases()
	var qs []question
	for ci, c := range cases {
		for _, at := range s.Instants() {
			qs = append(qs, question{caseIndex: ci, order: c.Order,
				text: fmt.Sprintf("instant query at %s (Base+%s): %s", unix(at), at.Sub(s.Base), c.Expr),
				ask: func(ctx context.Context, t *Target) (model.Value, error) {
					return t.Query(ctx, c.Expr, at)
				}})
		}
		if c.InstantOnly {
			continue
		}
		for _, r := range s.Ranges() {
			qs = append(qs, question{caseIndex: ci, order: ByLabels,
				text: fmt.Sprintf("range query [Base+%s, Base+%s] step %s: %s", r.Start.Sub(s.Base), r.End.Sub(s.Base), r.Step, c.Expr),
				ask: func(ctx context.Context, t *Target) (model.Value, error) {
					return t.QueryRange(ctx, c.Expr, v1.Range{Start: r.Start, End: r.End, Step: r.Step})
				}})
		}
	}

	rep := &Report{Reference: ref.Name, Subject: subject.Name}
	type outcome struct {
		brokenErr error
		values    int
		diffs     []string
	}
	out := make([]outcome, len(qs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Parallelism)
	for i, q := range qs {
		g.Go(func() error {
			want, werr := q.ask(gctx, ref)
			if werr != nil {
				out[i].brokenErr = werr
				return nil
			}
			out[i].values = count(want)
			got, gerr := q.ask(gctx, subject)
			if gerr != nil {
				out[i].diffs = []string{fmt.Sprintf("%s answered an error: %v", subject.Name, gerr)}
				return nil
			}
			out[i].diffs = CompareValues(want, got, q.order)
			return nil
		})
	}
	_ = g.Wait()

	hasData := make([]bool, len(cases))
	for i, q := range qs {
		rep.Questions++
		o := out[i]
		switch {
		case o.brokenErr != nil:
			rep.Broken = append(rep.Broken, fmt.Sprintf("%s: %s refused it: %v", q.text, ref.Name, o.brokenErr))
		case len(o.diffs) > 0:
			rep.Mismatches = append(rep.Mismatches, Mismatch{Question: q.text, Diffs: o.diffs})
		default:
			rep.Agreed++
		}
		rep.Values += o.values
		hasData[q.caseIndex] = hasData[q.caseIndex] || o.values > 0
	}
	for ci, c := range cases {
		if hasData[ci] == c.Empty {
			if c.Empty {
				rep.Broken = append(rep.Broken, fmt.Sprintf("%s: meant to find nothing, found data on %s", c.Expr, ref.Name))
			} else {
				rep.Broken = append(rep.Broken, fmt.Sprintf("%s: found nothing on %s at any time asked", c.Expr, ref.Name))
			}
		}
	}
	compareMeta(ctx, rep, ref, subject, s)
	return rep
}

// count is how many values an answer holds.
func count(v model.Value) int {
	switch v := v.(type) {
	case model.Vector:
		return len(v)
	case model.Matrix:
		n := 0
		for _, s := range v {
			n += len(s.Values)
		}
		return n
	case nil:
		return 0
	}
	return 1
}

// compareMeta asks the metadata questions. A reference that holds
// series of its own besides the set's (a server that scrapes something)
// is asked the questions without match[] with one that selects the set.
func compareMeta(ctx context.Context, rep *Report, ref, subject *Target, s *Set) {
	names, err := ref.LabelValues(ctx, "__name__", nil, time.Time{}, time.Time{})
	if err != nil {
		rep.Broken = append(rep.Broken, fmt.Sprintf("label_values __name__: %s refused it: %v", ref.Name, err))
		return
	}
	foreign := slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, "oracle") })
	for _, m := range s.MetaCases() {
		if foreign && len(m.Match) == 0 {
			m.Match = []string{`{__name__=~"oracle.+"}`}
		}
		text := fmt.Sprintf("%s %s match[]=%q", m.Endpoint, m.Name, m.Match)
		if !m.Start.IsZero() {
			text += fmt.Sprintf(" [Base+%s, Base+%s]", m.Start.Sub(s.Base), m.End.Sub(s.Base))
		}
		rep.Questions++
		var diffs []string
		var werr, gerr error
		switch m.Endpoint {
		case "series":
			var want, got []model.LabelSet
			want, werr = ref.Series(ctx, m.Match, m.Start, m.End)
			if werr == nil {
				got, gerr = subject.Series(ctx, m.Match, m.Start, m.End)
				diffs = CompareLabelSets(want, got)
			}
		case "labels":
			var want, got []string
			want, werr = ref.LabelNames(ctx, m.Match, m.Start, m.End)
			if werr == nil {
				got, gerr = subject.LabelNames(ctx, m.Match, m.Start, m.End)
				diffs = CompareStrings(want, got)
			}
		case "label_values":
			var want, got []string
			want, werr = ref.LabelValues(ctx, m.Name, m.Match, m.Start, m.End)
			if werr == nil {
				got, gerr = subject.LabelValues(ctx, m.Name, m.Match, m.Start, m.End)
				diffs = CompareStrings(want, got)
			}
		default:
			werr = fmt.Errorf("no endpoint %q", m.Endpoint)
		}
		switch {
		case werr != nil:
			rep.Broken = append(rep.Broken, fmt.Sprintf("%s: %s refused it: %v", text, ref.Name, werr))
		case gerr != nil:
			rep.Mismatches = append(rep.Mismatches, Mismatch{Question: text, Diffs: []string{fmt.Sprintf("%s answered an error: %v", subject.Name, gerr)}})
		case len(diffs) > 0:
			rep.Mismatches = append(rep.Mismatches, Mismatch{Question: text, Diffs: diffs})
		default:
			rep.Agreed++
		}
	}
}
