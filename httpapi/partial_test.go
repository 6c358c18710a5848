package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tsgate/tsgate/testkit/apitest"
	"github.com/tsgate/tsgate/testkit/querytest"
	"github.com/tsgate/tsgate/tiers"
)

// stuckReader never delivers a page of one bucket until the read's context
// ends — a replica that hangs; failing turns the hang into an error.
type stuckReader struct {
	tiers.PartitionReader
	stuckBucket int64
	failing     bool
}

type stuckPages struct {
	ctx     context.Context
	failing bool
}

var errReplica = errors.New("replica timed out")

func (p stuckPages) Next() ([]tiers.Row, error) {
	if p.failing {
		return nil, errReplica
	}
	<-p.ctx.Done()
	return nil, context.Cause(p.ctx)
}
func (p stuckPages) Close() error { return nil }

func (r stuckReader) Read(ctx context.Context, req tiers.ReadRequest) tiers.RowPages {
	if req.Key.Table == tiers.TableRaw && req.Key.Bucket == r.stuckBucket {
		return stuckPages{ctx: ctx, failing: r.failing}
	}
	return r.PartitionReader.Read(ctx, req)
}

// Under partial=allow a read that cannot complete answers 200 with what is
// complete, the reason and a cursor; under partial=deny it is a 504 (budget)
// or 503 (store) problem, never a truncated 200.
func TestPartialAllowAndDeny(t *testing.T) {
	for _, failing := range []bool{false, true} {
		store := newMemStore(t, querytest.Start)
		// The gateway's clock is querytest.Start; the hour before it is stuck.
		now := tiers.AlignDown(querytest.Start().UnixMilli(), tiers.Hour)
		env := querytest.NewEnv(t, store, querytest.Options{Wrap: func(r tiers.PartitionReader) tiers.PartitionReader {
			return stuckReader{PartitionReader: r, stuckBucket: now - tiers.Hour, failing: failing}
		}})
		s := &testServer{Server: apitest.Serve(t, env), t: t}
		var pts []string
		for i := range 30 {
			pts = append(pts, fmt.Sprintf(`{"series":"slow","t":%d,"v":%d}`, now-3*tiers.Hour+int64(i)*6*tiers.Minute, i))
		}
		s.WritePoints(pts...)
		path := fmt.Sprintf("/v1/series/slow/points?from=%d&to=%d&resolution=raw&slo=100ms", now-3*tiers.Hour, now)

		var a apitest.Answer
		if st := s.Get(path, &a); st != 200 {
			t.Fatalf("failing=%v allow: status %d", failing, st)
		}
		wantReason := "slo"
		if failing {
			wantReason = "unavailable"
		}
		if !a.Partial || a.Reason != wantReason || a.NextCursor == "" {
			t.Fatalf("failing=%v: partial %v reason %q cursor %q", failing, a.Partial, a.Reason, a.NextCursor)
		}
		// The two buckets before the stuck one are complete and delivered.
		if len(a.Points) != 20 || a.Covered[1] != now-tiers.Hour {
			t.Fatalf("failing=%v: %d points, covered %v; want the 20 points before %d", failing, len(a.Points), a.Covered, now-tiers.Hour)
		}
		status, ct, body := s.Do("GET", path+"&partial=deny", "", "")
		var p apitest.Problem
		_ = json.Unmarshal(body, &p)
		wantStatus := 504
		if failing {
			wantStatus = 503
		}
		if status != wantStatus || ct != "application/problem+json" || p.Status != wantStatus {
			t.Fatalf("failing=%v deny: %d %s %s", failing, status, ct, body)
		}
	}
}

// The latency budget is real time, whatever the clock that decides which
// data is current says: a gateway whose clock is set back still has its
// whole budget.
func TestBudgetRunsOnTheWallClock(t *testing.T) {
	s := newTestServer(t)
	s.SetClock(querytest.Start().Add(-30 * 24 * time.Hour))
	s.WritePoints(fmt.Sprintf(`{"series":"old","t":%d,"v":1}`, s.Now()-tiers.Minute))
	var a apitest.Answer
	if st := s.Get("/v1/series/old/points?"+q("from", "now-1h", "resolution", "raw", "slo", "5s", "partial", "deny"), &a); st != 200 || a.Partial || len(a.Points) != 1 {
		t.Fatalf("read: %d %+v", st, a)
	}
	status, _, body := s.Do("POST", "/v1/query", "application/json", `{"from":"now-1h","resolution":"raw","slo":"5s","partial":"deny","queries":[{"series":"old"}]}`)
	if status != 200 || strings.Contains(string(body), `"error"`) {
		t.Fatalf("batch: %d %s", status, body)
	}
}
