package ingest

import (
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// MaxRemoteWriteBytes bounds a remote-write body once snappy has decoded
// it: Prometheus sends a few MB at most, and a body that claims more is
// refused before it is decoded.
const MaxRemoteWriteBytes = 64 << 20

// RemoteWrite is what a Prometheus remote-write body holds: the points of
// its samples and the labels of its series, each series identified by
// params.LabelsID of its labels, and what was left out.
type RemoteWrite struct {
	Batch
	// Dropped counts samples that cannot be stored: Prometheus' staleness
	// markers and other values that are not finite numbers.
	Dropped int
}

// DecodeRemoteWrite reads a Prometheus remote-write 1.0 body (a protobuf
// WriteRequest, snappy block format), the maintained prompb types and
// klauspost's snappy decoder (the block format Prometheus writes). Each
// series becomes the series params.LabelsID names, with its labels; each
// sample a point. Exemplars and metadata are ignored. Native histograms
// are refused (the pyramid keeps float samples only), as are labels the
// gateway cannot keep; a body that is not snappy or not a WriteRequest is
// refused too: all as *ValidationError, so that Prometheus drops the batch
// rather than retrying it forever.
func DecodeRemoteWrite(r io.Reader) (RemoteWrite, error) {
	compressed, err := io.ReadAll(r)
	if err != nil {
		return RemoteWrite{}, err // too large, or the client left
	}
	bad := func(msg string) error {
		return &ValidationError{Errors: []params.Error{{Param: "body", Message: msg}}}
	}
	n, err := snappy.DecodedLen(compressed)
	switch {
	case err != nil:
		return RemoteWrite{}, bad("not snappy-compressed (remote write sends a snappy block): " + err.Error())
	case n > MaxRemoteWriteBytes:
		return RemoteWrite{}, bad(fmt.Sprintf("decodes to %d bytes, more than %d", n, MaxRemoteWriteBytes))
	}
	raw, err := snappy.Decode(nil, compressed)
	if err != nil {
		return RemoteWrite{}, bad("not snappy-compressed: " + err.Error())
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		return RemoteWrite{}, bad("not a remote-write WriteRequest: " + err.Error())
	}
	var out RemoteWrite
	verr := &ValidationError{}
	points := 0
	for _, ts := range req.Timeseries {
		points += len(ts.Samples)
	}
	out.Points = make([]Point, 0, points)
	out.Labels = make(map[string]tiers.Labels, len(req.Timeseries))
	for i, ts := range req.Timeseries {
		param := fmt.Sprintf("timeseries[%d]", i)
		if len(ts.Histograms) > 0 {
			verr.Invalid++
			verr.add(param+".histograms", "native histograms are not supported: the gateway keeps float samples; send classic histograms (_bucket, _sum, _count)")
			continue
		}
		l := make(tiers.Labels, len(ts.Labels))
		for _, lb := range ts.Labels {
			if _, dup := l[lb.Name]; dup {
				verr.Invalid++
				verr.add(param+".labels", "label "+lb.Name+" appears twice")
			}
			l[lb.Name] = lb.Value
		}
		if l[params.MetricName] == "" {
			verr.Invalid++
			verr.add(param+".labels", "a series needs a metric name (__name__)")
			continue
		}
		if err := params.Labels(l, 0); err != nil {
			verr.Invalid++
			verr.add(param+".labels", err.Error())
			continue
		}
		id := params.LabelsID(l)
		if err := params.SeriesID(id); err != nil {
			verr.Invalid++
			verr.add(param+".labels", "the metric name is too long for a series id: "+err.Error())
			continue
		}
		if prev, ok := out.Labels[id]; ok && !prev.Equal(l.Stored()) {
			verr.Invalid++
			verr.add(param+".labels", "two series of the body share the id "+id)
			continue
		}
		out.Labels[id] = l.Stored()
		for _, s := range ts.Samples {
			// A stale marker is kept: it ends the series for PromQL's
			// lookback (tiers.IsStale). Other NaNs and infinities have no
			// place in the pyramid's aggregates.
			if !value.IsStaleNaN(s.Value) && (math.IsNaN(s.Value) || math.IsInf(s.Value, 0)) {
				out.Dropped++
				continue
			}
			out.Points = append(out.Points, Point{Series: id, T: s.Timestamp, V: s.Value})
		}
	}
	if verr.Invalid > 0 {
		verr.Total = len(req.Timeseries)
		return RemoteWrite{}, verr
	}
	return out, nil
}
