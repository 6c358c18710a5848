package httpapi

import (
	"io"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/problem"

	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tsgate/tsgate/rollup"
)

// rollupRuns keeps the latest on-demand rollup runs, so that a run goes on
// when its client leaves and its outcome can still be read.
type rollupRuns struct {
	mu   sync.Mutex
	next int64
	runs map[int64]*rollupRun
	ids  []int64 // oldest first
}

// keptRollupRuns is how many runs' outcomes stay readable.
const keptRollupRuns = 32

type rollupRun struct {
	id      int64
	started time.Time
	done    chan struct{}
	// set before done closes
	report rollup.Report
	err    error
}

func newRollupRuns() *rollupRuns { return &rollupRuns{runs: map[int64]*rollupRun{}} }

func (rr *rollupRuns) start(run func() (rollup.Report, error)) *rollupRun {
	rr.mu.Lock()
	rr.next++
	r := &rollupRun{id: rr.next, started: time.Now(), done: make(chan struct{})}
	rr.runs[r.id] = r
	rr.ids = append(rr.ids, r.id)
	if len(rr.ids) > keptRollupRuns {
		delete(rr.runs, rr.ids[0])
		rr.ids = rr.ids[1:]
	}
	rr.mu.Unlock()
	go func() {
		defer close(r.done)
		r.report, r.err = run()
	}()
	return r
}

func (rr *rollupRuns) get(id int64) *rollupRun {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.runs[id]
}

// runRollups runs every pending rollup. The run is detached from the
// request: it finishes whatever the client does. A client that waits gets
// the report (200) as soon as the run ends; with wait=false, or a run that
// outlasts the request, the answer is 202 with the run's address.
func (s *Server) runRollups(w http.ResponseWriter, r *http.Request) {
	// The run takes no body: an empty one is allowed, with no Content-Type
	// or application/json, since clients differ in what they send with an
	// empty POST; anything else is a request for something this is not.
	if n := bodyBytes(r); n > 0 || (r.Header.Get("Content-Type") != "" && !hasMediaType(r, "application/json")) {
		s.writeProblem(w, r, unsupportedMedia("a rollup run takes no body; send none", r.Header.Get("Content-Type")))
		return
	}
	ctx := context.WithoutCancel(r.Context())
	run := s.rolls.start(func() (rollup.Report, error) { return s.deps.Rollups.RunOnce(ctx, true) })
	if r.URL.Query().Get("wait") == "false" {
		s.writeRollupRun(w, r, run, http.StatusAccepted)
		return
	}
	select {
	case <-run.done:
		if run.err != nil {
			s.writeProblem(w, r, failure.Mark(run.err, failure.Unavailable))
			return
		}
		writeJSON(w, http.StatusOK, append(rollupReportJSON(run.report), '\n'))
	case <-r.Context().Done():
		// The client left; the run goes on and its outcome stays readable.
		s.logger(r).Info("rollup run continues without its client", "run", run.id)
	}
}

// rollupRun answers the state of one run.
func (s *Server) rollupRun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	run := s.rolls.get(id)
	if err != nil || run == nil {
		s.writeProblem(w, r, &Problem{Type: problem.Type("not-found"), Title: "Not found", Status: http.StatusNotFound,
			Detail: "no rollup run " + chi.URLParam(r, "run") + "; the latest " + strconv.Itoa(keptRollupRuns) + " runs are kept"})
		return
	}
	s.writeRollupRun(w, r, run, http.StatusOK)
}

func (s *Server) writeRollupRun(w http.ResponseWriter, r *http.Request, run *rollupRun, status int) {
	out := struct {
		ID      string          `json:"id"`
		State   string          `json:"state"`
		Started int64           `json:"started"`
		Report  json.RawMessage `json:"report,omitempty"`
		Error   *Problem        `json:"error,omitempty"`
	}{ID: strconv.FormatInt(run.id, 10), State: "running", Started: run.started.UnixMilli()}
	select {
	case <-run.done:
		if run.err != nil {
			out.State, out.Error = "failed", problem.From(failure.Mark(run.err, failure.Unavailable))
		} else {
			out.State, out.Report = "done", rollupReportJSON(run.report)
		}
	default:
	}
	w.Header().Set("Location", "/v1/admin/rollups/runs/"+out.ID)
	writeValue(w, status, out)
}

func rollupReportJSON(rep rollup.Report) []byte {
	b, _ := json.Marshal(struct {
		Slots      int              `json:"slots"`
		From       int64            `json:"from"`
		To         int64            `json:"to"`
		Windows    map[string]int64 `json:"windows"`
		RowsRead   int64            `json:"rows_read"`
		Checkpoint int64            `json:"checkpoint"`
		ElapsedMs  float64          `json:"elapsed_ms"`
	}{rep.Slots, rep.From, rep.To, rep.Windows, rep.RowsRead, rep.Checkpoint, float64(rep.Elapsed.Microseconds()) / 1000})
	return b
}

// bodyBytes is 1 when the request has a body with anything in it.
func bodyBytes(r *http.Request) int {
	if r.Body == nil {
		return 0
	}
	n, _ := io.ReadFull(r.Body, make([]byte, 1))
	return n
}
