package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/query"
	"github.com/tsgate/tsgate/router"
)

// readParams are the names request may report.
var readParams = []string{"from", "to", "resolution", "max_points", "agg", "order", "limit", "slo", "partial"}

// FuzzReadFields: the read parameters, each of any text. Every error
// names a parameter; what is accepted holds what was asked: the order and
// partial enumerations, the resolution kind, and aggregates that print
// back as asked.
func FuzzReadFields(f *testing.F) {
	f.Add("now-1h", "", "", "", "", "", "", "", "")
	f.Add("2026-01-15T14:37:22Z", "1768487842123", "raw", "", "min, max", "desc", "10", "250ms", "deny")
	f.Add("now-7d", "now", "auto", "500", "count", "asc", "", "0s", "allow")
	f.Add("now-7d", "now", "1.5h", "", "avg,avg", "up", "0", "-1s", "maybe")
	f.Add("", "now-1h", "500ms", "10", "median", "ASC", "x", "1", "")
	f.Fuzz(func(t *testing.T, from, to, resolution, maxPoints, agg, order, limit, slo, partialText string) {
		in := readFields{From: from, To: to, Resolution: resolution, MaxPoints: maxPoints, Agg: []string{agg}, Order: order, Limit: limit, SLO: slo, Partial: partialText}
		req, errs := in.request("s-1", keep)
		for _, e := range errs {
			if !slices.Contains(readParams, e.Param) || e.Message == "" {
				t.Fatalf("%+v: error %+v", in, e)
			}
		}
		named := func(p string) bool {
			return slices.ContainsFunc(errs, func(e *params.Error) bool { return e.Param == p })
		}
		if !named("order") && (order != "" && order != "asc" && order != "desc" || req.Desc != (order == "desc")) {
			t.Fatalf("order %q accepted as desc=%v", order, req.Desc)
		}
		if !named("partial") && (partialText != "" && partialText != "allow" && partialText != "deny" || req.Deny != (partialText == "deny")) {
			t.Fatalf("partial %q accepted as deny=%v", partialText, req.Deny)
		}
		if !named("resolution") {
			switch kind := req.Resolution.Kind; {
			case resolution == "" || resolution == "auto":
				if kind != router.Auto {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			case resolution == "raw":
				if kind != router.RawPoints {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			default:
				d, err := params.Duration(resolution)
				if kind != router.Window || err != nil || req.Resolution.Window != d {
					t.Fatalf("resolution %q is %+v", resolution, req.Resolution)
				}
			}
		}
		if !named("agg") && agg != "" {
			names := strings.Split(agg, ",")
			for i := range names {
				names[i] = strings.TrimSpace(names[i])
			}
			if query.FormatAggs(req.Aggs) != strings.Join(names, ",") {
				t.Fatalf("agg %q accepted as %v", agg, req.Aggs)
			}
		}
		if limit != "" && req.Limit != -1 && req.Limit < 1 {
			t.Fatalf("limit %q read as %d", limit, req.Limit)
		}
		if maxPoints != "" && req.MaxPoints != -1 && req.MaxPoints < 1 {
			t.Fatalf("max_points %q read as %d", maxPoints, req.MaxPoints)
		}
		if !named("slo") && slo != "" && req.SLO == 0 {
			t.Fatalf("slo %q read as no budget", slo)
		}
	})
}
