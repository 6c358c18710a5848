package kafkaingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
)

// fakeWriter takes every write but those it is told to fail: the first
// failStore calls fail as a store does, and a batch holding a point older
// than oldest is refused as the write path refuses it.
type fakeWriter struct {
	mu        sync.Mutex
	failStore int
	oldest    int64
	writes    [][]ingest.Point
	attempts  int
}

var _ Writer = (*fakeWriter)(nil)

var errStore = errors.New("cassandra: no host available")

func (f *fakeWriter) WriteBatch(_ context.Context, b ingest.Batch) (ingest.Result, error) {
	pts := b.Points
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.failStore > 0 {
		f.failStore--
		return ingest.Result{}, errStore
	}
	verr := &ingest.ValidationError{Total: len(pts)}
	for i, p := range pts {
		if p.T < f.oldest {
			verr.Invalid++
			verr.Errors = append(verr.Errors, params.Error{Param: fmt.Sprintf("points[%d].t", i), Message: "is older than the raw tier's retention"})
		}
	}
	if verr.Invalid > 0 {
		return ingest.Result{}, verr
	}
	f.writes = append(f.writes, slices.Clone(pts))
	return ingest.Result{Accepted: len(pts)}, nil
}

func (f *fakeWriter) Check(*ingest.ValidationError) {}

// fakeDeadLetters keeps what it is sent; the first fail sends fail.
type fakeDeadLetters struct {
	fail int
	sent []deadLetter
}

type deadLetter struct {
	offset int64
	why    Refusal
}

func (d *fakeDeadLetters) Send(_ context.Context, rec *kgo.Record, why Refusal) error {
	if d.fail > 0 {
		d.fail--
		return errors.New("NOT_LEADER_FOR_PARTITION")
	}
	d.sent = append(d.sent, deadLetter{rec.Offset, why})
	return nil
}

// harness is a processor over fakes, with what it marked and told.
type harness struct {
	*processor
	w       *fakeWriter
	d       *fakeDeadLetters
	marked  []int64
	failing []bool
	halt    chan struct{}
}

func newHarness(t *testing.T, batchPoints int) *harness {
	t.Helper()
	h := &harness{w: &fakeWriter{}, d: &fakeDeadLetters{}, halt: make(chan struct{})}
	h.processor = &processor{
		writer: h.w, dead: h.d, halt: h.halt, now: storetest.Start,
		mark:        func(r *kgo.Record) { h.marked = append(h.marked, r.Offset) },
		failing:     func(f bool) { h.failing = append(h.failing, f) },
		batchPoints: batchPoints, retryMin: time.Microsecond, retryMax: time.Millisecond,
		metrics: NewMetrics(prometheus.NewRegistry()), log: slog.New(slog.DiscardHandler),
		retries: &throttle{}, refusals: &throttle{},
	}
	return h
}

// rec is a record of partition 0 at offset off.
func rec(off int64, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: "points", Offset: off, Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// jsonRec is a JSON record of n points of series s from t on.
func jsonRec(off int64, s string, t int64, n int) *kgo.Record {
	var pts []string
	for i := range n {
		pts = append(pts, fmt.Sprintf(`{"series":%q,"t":%d,"v":%d}`, s, t+int64(i), i))
	}
	return rec(off, `{"points":[`+strings.Join(pts, ",")+`]}`)
}

var t0 = storetest.Start().UnixMilli()

// Consecutive records are written together, up to the batch size, and
// the last record of each write is marked once it is durable.
func TestProcessWritesConsecutiveRecordsTogether(t *testing.T) {
	h := newHarness(t, 6)
	recs := []*kgo.Record{jsonRec(10, "a", t0, 3), jsonRec(11, "b", t0, 3), jsonRec(12, "a", t0+3, 3), jsonRec(13, "c", t0, 2)}
	if err := h.process(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if len(h.w.writes) != 2 || len(h.w.writes[0]) != 6 || len(h.w.writes[1]) != 5 {
		t.Fatalf("writes of %v points, want 6 and 5", lens(h.w.writes))
	}
	if h.w.writes[0][3].Series != "b" || h.w.writes[1][4].Series != "c" {
		t.Fatalf("points out of record order: %v", h.w.writes)
	}
	if !slices.Equal(h.marked, []int64{11, 13}) {
		t.Fatalf("marked %v, want [11 13]", h.marked)
	}
	if got := testutil.ToFloat64(h.metrics.points); got != 11 {
		t.Fatalf("points counted %v, want 11", got)
	}
	if got := testutil.ToFloat64(h.metrics.records); got != 4 {
		t.Fatalf("records counted %v, want 4", got)
	}
}

func lens(ws [][]ingest.Point) []int {
	var out []int
	for _, w := range ws {
		out = append(out, len(w))
	}
	return out
}

// A record that can never be written goes to the dead-letter topic with
// the reason, after the records before it are written and before those
// after it; marks follow the offsets.
func TestProcessDeadLettersBadRecordsInOrder(t *testing.T) {
	h := newHarness(t, 1000)
	recs := []*kgo.Record{
		jsonRec(0, "a", t0, 2),
		rec(1, `{"points":[{"series":"a","t":1,"v":"high"}]}`),
		rec(2, "\x0a\x03abc", "Content-Type", "application/x-protobuf"),
		rec(3, `a,b`, "content-type", "text/csv"),
		jsonRec(4, "b", t0, 2),
		rec(5, `{"series":"c","t":1768487842123,"v":1}`+"\n"+`{"series":"c","t":1768487843123,"v":2}`),
	}
	if err := h.process(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.marked, []int64{0, 1, 2, 3, 5}) {
		t.Fatalf("marked %v, want [0 1 2 3 5]", h.marked)
	}
	if len(h.w.writes) != 2 || len(h.w.writes[1]) != 4 {
		t.Fatalf("writes of %v points, want 2 then 4 (records 4 and 5 together)", lens(h.w.writes))
	}
	want := []struct {
		offset int64
		kind   string
		reason string
	}{
		{1, refusedInvalid, "points[0].v: must be a number"},
		{2, refusedInvalid, "not snappy-compressed"},
		{3, refusedMedia, `content-type "text/csv" is not a point format`},
	}
	if len(h.d.sent) != len(want) {
		t.Fatalf("dead letters %+v, want %d", h.d.sent, len(want))
	}
	for i, w := range want {
		got := h.d.sent[i]
		if got.offset != w.offset || got.why.Kind != w.kind || !strings.Contains(got.why.Reason, w.reason) {
			t.Errorf("dead letter %d: %+v, want offset %d, kind %s, reason with %q", i, got, w.offset, w.kind, w.reason)
		}
	}
	if e := h.d.sent[0].why.Errors; len(e) != 1 || e[0].Param != "points[0].v" {
		t.Errorf("errors of the invalid record: %+v", e)
	}
	if got := testutil.ToFloat64(h.metrics.deadLetters.WithLabelValues(refusedMedia)); got != 1 {
		t.Errorf("media dead letters counted %v, want 1", got)
	}
}

// When the write path refuses a batch of several records, each is
// written on its own, so that only the bad one is dead-lettered.
func TestProcessRefusedBatchIsSplit(t *testing.T) {
	h := newHarness(t, 1000)
	h.w.oldest = t0
	recs := []*kgo.Record{jsonRec(7, "a", t0, 2), jsonRec(8, "old", t0-5, 2), jsonRec(9, "b", t0, 2)}
	if err := h.process(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if len(h.w.writes) != 2 || h.w.writes[0][0].Series != "a" || h.w.writes[1][0].Series != "b" {
		t.Fatalf("writes %v, want record 7 then record 9", h.w.writes)
	}
	if len(h.d.sent) != 1 || h.d.sent[0].offset != 8 || h.d.sent[0].why.Errors[0].Param != "points[0].t" {
		t.Fatalf("dead letters %+v, want record 8 with its own point numbers", h.d.sent)
	}
	if !slices.Equal(h.marked, []int64{7, 8, 9}) {
		t.Fatalf("marked %v", h.marked)
	}
}

// Store errors are retried until the store takes the write, with the
// partition's fetching paused meanwhile; nothing is dead-lettered, and
// the record is marked only once written.
func TestProcessRetriesStoreErrors(t *testing.T) {
	h := newHarness(t, 1000)
	h.w.failStore = 5
	if err := h.process(context.Background(), []*kgo.Record{jsonRec(3, "a", t0, 4)}); err != nil {
		t.Fatal(err)
	}
	if h.w.attempts != 6 || len(h.w.writes) != 1 || len(h.d.sent) != 0 {
		t.Fatalf("%d attempts, %d writes, %d dead letters; want 6, 1, 0", h.w.attempts, len(h.w.writes), len(h.d.sent))
	}
	if !slices.Equal(h.failing, []bool{true, false}) || !slices.Equal(h.marked, []int64{3}) {
		t.Fatalf("failing %v, marked %v", h.failing, h.marked)
	}
	if got := testutil.ToFloat64(h.metrics.retries.WithLabelValues(causeStore)); got != 5 {
		t.Fatalf("retries counted %v, want 5", got)
	}
}

// Halted while the store fails, processing stops without marking
// anything: the records are left to whoever consumes the partition next.
func TestProcessHaltedWhileRetrying(t *testing.T) {
	h := newHarness(t, 1000)
	h.w.failStore = 1 << 30
	h.retryMin, h.retryMax = time.Millisecond, time.Millisecond
	done := make(chan error)
	go func() {
		done <- h.process(context.Background(), []*kgo.Record{jsonRec(0, "a", t0, 1), jsonRec(1, "a", t0+1, 1)})
	}()
	for {
		h.w.mu.Lock()
		n := h.w.attempts
		h.w.mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(h.halt)
	if err := <-done; !errors.Is(err, errHalted) {
		t.Fatalf("process returned %v, want errHalted", err)
	}
	if len(h.marked) != 0 || len(h.d.sent) != 0 {
		t.Fatalf("marked %v, dead letters %v after a halt; want none", h.marked, h.d.sent)
	}
}

// A dead letter the topic does not take is sent again; the record is
// marked only once it is there.
func TestProcessRetriesDeadLetters(t *testing.T) {
	h := newHarness(t, 1000)
	h.d.fail = 2
	if err := h.process(context.Background(), []*kgo.Record{rec(4, "not json")}); err != nil {
		t.Fatal(err)
	}
	if len(h.d.sent) != 1 || !slices.Equal(h.marked, []int64{4}) {
		t.Fatalf("dead letters %v, marked %v", h.d.sent, h.marked)
	}
	if got := testutil.ToFloat64(h.metrics.retries.WithLabelValues(causeDeadLetter)); got != 2 {
		t.Fatalf("dead-letter retries counted %v, want 2", got)
	}
}

// knownSeries is a registry that knows the series of its set.
type knownSeries map[string]bool

func (k knownSeries) LookupSeries(_ context.Context, id string) (tiers.SeriesInfo, error) {
	if k[id] {
		return tiers.SeriesInfo{ID: id}, nil
	}
	return tiers.SeriesInfo{}, tiers.ErrNotFound
}

// The bound on new series applies per record as it applies per HTTP
// batch: a record creating more than a batch may is dead-lettered; the
// others pass.
func TestProcessNewSeriesBound(t *testing.T) {
	h := newHarness(t, 1000)
	h.newSeries = ingest.NewNewSeriesLimit(2, 100)
	h.registry = knownSeries{"known": true}
	many := rec(1, `{"series":"n1","t":1768487842123,"v":1}`+"\n"+`{"series":"n2","t":1768487842123,"v":1}`+"\n"+`{"series":"n3","t":1768487842123,"v":1}`)
	recs := []*kgo.Record{jsonRec(0, "known", t0, 2), many, jsonRec(2, "n1", t0, 1), jsonRec(3, "n2", t0, 1)}
	if err := h.process(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if len(h.d.sent) != 1 || h.d.sent[0].offset != 1 || h.d.sent[0].why.Kind != refusedNewSeries || !strings.Contains(h.d.sent[0].why.Reason, "3 new series") {
		t.Fatalf("dead letters %+v, want record 1 for 3 new series", h.d.sent)
	}
	if !slices.Equal(h.marked, []int64{0, 1, 3}) || len(h.w.writes) != 2 {
		t.Fatalf("marked %v, writes %v", h.marked, lens(h.w.writes))
	}
}
