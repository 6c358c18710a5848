package kafkaingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Writer is the write path records go through (ingest.Writer): Write
// returns once every point is durable, or an *ingest.ValidationError and
// writes nothing, or another error after which a retry of the same points
// is safe. Check completes a decoder's refusal with the checks Write makes.
type Writer interface {
	WriteBatch(ctx context.Context, b ingest.Batch) (ingest.Result, error)
	Check(verr *ingest.ValidationError)
}

var _ Writer = (*ingest.Writer)(nil)

// DeadLetters takes the records that can never be written. Send returns
// once the record is durably in the dead-letter topic; an error means it
// is not, and a retry is safe.
type DeadLetters interface {
	Send(ctx context.Context, rec *kgo.Record, why Refusal) error
}

// Refusal says why a record can never be written.
type Refusal struct {
	// Kind is invalid (the /v1/points validation refused it), media (its
	// content type has no decoder) or new_series (it creates more series
	// than a batch may).
	Kind string
	// Reason is one sentence for people.
	Reason string
	// Errors name the bad parts, as the HTTP API's problem does.
	Errors []params.Error
}

// Kinds of refusals.
const (
	refusedInvalid   = "invalid"
	refusedMedia     = "media"
	refusedNewSeries = "new_series"
)

// errHalted ends processing that was asked to stop before every record was
// handled; the records not handled are not marked.
var errHalted = errors.New("processing halted")

// processor handles the records of one partition in offset order: it
// decodes each with the HTTP writes' decoders, writes the points of
// consecutive records together through the Writer, sends the records that
// can never be written to the dead-letter topic, and marks a record once
// it and every record before it are durably handled. Store errors are
// retried with backoff, never dead-lettered.
type processor struct {
	writer    Writer
	dead      DeadLetters
	newSeries *ingest.NewSeriesLimit
	registry  ingest.SeriesLookup
	// mark is told of a record once it and every record before it are
	// durably handled (written or dead-lettered).
	mark func(rec *kgo.Record)
	// failing is told when the store starts failing (true) and when it
	// answers again (false), so that fetching pauses meanwhile.
	failing func(bool)
	// halt, once closed, stops the processing before the next write
	// attempt; the attempt in flight finishes under its context.
	halt        <-chan struct{}
	now         func() time.Time
	batchPoints int
	retryMin    time.Duration
	retryMax    time.Duration
	metrics     *Metrics
	log         *slog.Logger
	// retries and refusals throttle the log lines of failed attempts and
	// of dead letters.
	retries, refusals *throttle
}

// decoded is a record whose points (and labels) decoded.
type decoded struct {
	rec   *kgo.Record
	batch ingest.Batch
}

// process handles recs, which follow each other in one partition. It
// returns nil once every record is handled, errHalted or the context's
// error when it stopped before.
func (p *processor) process(ctx context.Context, recs []*kgo.Record) error {
	var group []decoded
	points := 0
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		err := p.writeGroup(ctx, group, false)
		group, points = nil, 0
		return err
	}
	for _, rec := range recs {
		pts, why, err := p.decode(ctx, rec)
		if err != nil {
			return err
		}
		if why != nil {
			// The records before it are durable before it is marked.
			if err := flush(); err != nil {
				return err
			}
			if err := p.deadLetter(ctx, rec, *why); err != nil {
				return err
			}
			continue
		}
		if points > 0 && points+len(pts.Points) > p.batchPoints {
			if err := flush(); err != nil {
				return err
			}
		}
		group = append(group, decoded{rec, pts})
		points += len(pts.Points)
	}
	return flush()
}

// decode returns the points of rec, or why it can never be written.
func (p *processor) decode(ctx context.Context, rec *kgo.Record) (ingest.Batch, *Refusal, error) {
	b, err := decodeRecord(rec, p.now().UnixMilli())
	if err != nil {
		var ve *ingest.ValidationError
		var me *mediaError
		switch {
		case errors.As(err, &ve):
			p.writer.Check(ve)
			return ingest.Batch{}, &Refusal{Kind: refusedInvalid, Reason: validationReason(ve), Errors: ve.Errors}, nil
		case errors.As(err, &me):
			return ingest.Batch{}, &Refusal{Kind: refusedMedia, Reason: me.Error()}, nil
		default:
			return ingest.Batch{}, &Refusal{Kind: refusedInvalid, Reason: err.Error()}, nil
		}
	}
	if p.newSeries == nil {
		return b, nil, nil
	}
	var fresh int
	err = p.retry(ctx, causeStore, func() error {
		fresh, err = p.newSeries.Count(ctx, p.registry, b.Points)
		return err
	})
	if err != nil {
		return ingest.Batch{}, nil, err
	}
	if err := p.newSeries.CheckBatch(fresh); err != nil {
		return ingest.Batch{}, &Refusal{Kind: refusedNewSeries, Reason: err.Error(), Errors: []params.Error{{Param: "points", Message: err.Error()}}}, nil
	}
	return b, nil, nil
}

// validationReason is the sentence of a refused record: the summary and
// its first errors.
func validationReason(ve *ingest.ValidationError) string {
	var b strings.Builder
	b.WriteString(ve.Error())
	for i, e := range ve.Errors {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(ve.Errors)-i)
			break
		}
		if i == 0 && len(ve.Errors) == 1 && ve.Error() == e.Param+": "+e.Message {
			break // the summary is the error
		}
		fmt.Fprintf(&b, "; %s: %s", e.Param, e.Message)
	}
	return b.String()
}

// writeGroup writes the points of consecutive records at once and marks
// the last. When the batch is refused, each record is written on its own,
// so that only the bad ones are dead-lettered. admitted says that the
// group's new series were admitted already.
func (p *processor) writeGroup(ctx context.Context, group []decoded, admitted bool) error {
	batch := group[0].batch
	if len(group) > 1 {
		batch = ingest.Batch{}
		for _, d := range group {
			batch.Points = append(batch.Points, d.batch.Points...)
			for id, l := range d.batch.Labels {
				if batch.Labels == nil {
					batch.Labels = map[string]tiers.Labels{}
				}
				if prev, ok := batch.Labels[id]; ok && !prev.Equal(l) {
					// Records that disagree on a series' labels are
					// written one by one: the later is refused alone.
					return p.eachAlone(ctx, group, admitted)
				}
				batch.Labels[id] = l
			}
		}
	}
	if !admitted {
		why, err := p.admit(ctx, batch.Points)
		if err != nil {
			return err
		}
		if why != nil {
			if len(group) > 1 {
				return p.eachAlone(ctx, group, false)
			}
			return p.deadLetter(ctx, group[0].rec, *why)
		}
	}
	var res ingest.Result
	err := p.retry(ctx, causeStore, func() error {
		var err error
		res, err = p.writer.WriteBatch(ctx, batch)
		return err
	})
	var ve *ingest.ValidationError
	switch {
	case errors.As(err, &ve) && len(group) > 1:
		return p.eachAlone(ctx, group, true)
	case errors.As(err, &ve):
		return p.deadLetter(ctx, group[0].rec, Refusal{Kind: refusedInvalid, Reason: validationReason(ve), Errors: ve.Errors})
	case err != nil:
		return err
	}
	last := group[len(group)-1].rec
	p.mark(last)
	p.metrics.points.Add(float64(res.Accepted))
	for _, d := range group {
		p.handled(d.rec)
	}
	return nil
}

// eachAlone writes each record of a refused group on its own.
func (p *processor) eachAlone(ctx context.Context, group []decoded, admitted bool) error {
	for _, d := range group {
		if err := p.writeGroup(ctx, []decoded{d}, admitted); err != nil {
			return err
		}
	}
	return nil
}

// admit counts the new series of pts against the per-minute bound,
// waiting while the rate is exceeded; a refusal when they exceed it on
// their own.
func (p *processor) admit(ctx context.Context, pts []ingest.Point) (*Refusal, error) {
	if p.newSeries == nil {
		return nil, nil
	}
	var fresh int
	err := p.retry(ctx, causeStore, func() error {
		var err error
		fresh, err = p.newSeries.Count(ctx, p.registry, pts)
		return err
	})
	if err != nil || fresh == 0 {
		return nil, err
	}
	var never *Refusal
	err = p.retry(ctx, causeNewSeriesRate, func() error {
		err := p.newSeries.Admit(fresh, p.now())
		var ns *ingest.NewSeriesError
		if errors.As(err, &ns) && ns.New > ns.Limit {
			never = &Refusal{Kind: refusedNewSeries, Reason: err.Error(), Errors: []params.Error{{Param: "points", Message: err.Error()}}}
			return nil
		}
		return err
	})
	return never, err
}

// deadLetter sends rec to the dead-letter topic, again until it is there,
// and marks it.
func (p *processor) deadLetter(ctx context.Context, rec *kgo.Record, why Refusal) error {
	if err := p.retry(ctx, causeDeadLetter, func() error { return p.dead.Send(ctx, rec, why) }); err != nil {
		return err
	}
	p.mark(rec)
	p.metrics.deadLetters.WithLabelValues(why.Kind).Inc()
	p.handled(rec)
	p.refusals.log(p.log, "a record that can never be written went to the dead-letter topic",
		"offset", rec.Offset, "kind", why.Kind, "reason", why.Reason)
	return nil
}

// handled counts a record done with.
func (p *processor) handled(rec *kgo.Record) {
	p.metrics.records.Inc()
	if !rec.Timestamp.IsZero() {
		p.metrics.delay.Observe(max(0, p.now().Sub(rec.Timestamp).Seconds()))
	}
}

// Causes of retries.
const (
	causeStore         = "store"
	causeDeadLetter    = "dead_letter"
	causeNewSeriesRate = "new_series_rate"
)

// retry runs attempt until it succeeds or fails with an
// *ingest.ValidationError (returned), waiting between attempts from
// retryMin doubling up to retryMax. While it fails, failing(true) pauses
// the partition's fetching. It stops with errHalted or the context's
// error.
func (p *processor) retry(ctx context.Context, cause string, attempt func() error) error {
	wait := p.retryMin
	for n := 0; ; n++ {
		select {
		case <-p.halt:
			return errHalted
		default:
		}
		err := attempt()
		var ve *ingest.ValidationError
		if err == nil || errors.As(err, &ve) {
			if n > 0 {
				p.failing(false)
				p.log.Info("writing from Kafka again", "cause", cause, "attempts", n+1)
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.metrics.retries.WithLabelValues(cause).Inc()
		if n == 0 {
			p.failing(true)
		}
		p.retries.log(p.log, "Kafka records wait: the write did not go through; retrying (fetching is paused meanwhile)",
			"cause", cause, "attempt", n+1, "retry_in", wait, "err", err)
		select {
		case <-p.halt:
			return errHalted
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, p.retryMax)
	}
}

// throttle logs at most one line a second; the lines it drops are counted
// in the next one.
type throttle struct {
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (t *throttle) log(l *slog.Logger, msg string, args ...any) {
	t.mu.Lock()
	now := time.Now()
	if now.Sub(t.last) < time.Second {
		t.dropped++
		t.mu.Unlock()
		return
	}
	dropped := t.dropped
	t.last, t.dropped = now, 0
	t.mu.Unlock()
	if dropped > 0 {
		args = append(args, "similar_lines_dropped", dropped)
	}
	l.Warn(msg, args...)
}
