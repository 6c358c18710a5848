package promapi

// Remote read: the gateway as a Prometheus server's remote storage.

import (
	"errors"
	"io"
	"net/http"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// maxReadRequestBytes bounds a remote-read request, decoded.
const maxReadRequestBytes = 4 << 20

// remoteRead answers POST /api/v1/read with the sampled response: each
// query's series with their samples in [start, end], snappy protobuf.
// Prometheus asks for streamed chunks first and takes a sampled answer
// as well.
func (a *API) remoteRead(w http.ResponseWriter, r *http.Request) {
	compressed, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReadRequestBytes))
	if err != nil {
		writeError(w, badData("cannot read the body: %v", err))
		return
	}
	raw, err := snappy.Decode(nil, compressed)
	if err != nil {
		writeError(w, badData("the body is not snappy-compressed: %v", err))
		return
	}
	var req prompb.ReadRequest
	if err := req.Unmarshal(raw); err != nil {
		writeError(w, badData("the body is not a remote-read ReadRequest: %v", err))
		return
	}
	resp := prompb.ReadResponse{Results: make([]*prompb.QueryResult, len(req.Queries))}
	storageOf := a.queryable()
	for i, rq := range req.Queries {
		ms := make([]*labels.Matcher, 0, len(rq.Matchers))
		for _, m := range rq.Matchers {
			var typ labels.MatchType
			switch m.Type {
			case prompb.LabelMatcher_EQ:
				typ = labels.MatchEqual
			case prompb.LabelMatcher_NEQ:
				typ = labels.MatchNotEqual
			case prompb.LabelMatcher_RE:
				typ = labels.MatchRegexp
			case prompb.LabelMatcher_NRE:
				typ = labels.MatchNotRegexp
			default:
				writeError(w, badData("unknown matcher type %d", m.Type))
				return
			}
			lm, err := labels.NewMatcher(typ, m.Name, m.Value)
			if err != nil {
				writeError(w, badData("matcher %s: %v", m.Name, err))
				return
			}
			ms = append(ms, lm)
		}
		q, _ := storageOf.Querier(rq.StartTimestampMs, rq.EndTimestampMs)
		set := q.Select(r.Context(), true, &storage.SelectHints{Start: rq.StartTimestampMs, End: rq.EndTimestampMs}, ms...)
		result := &prompb.QueryResult{}
		var it chunkenc.Iterator
		for set.Next() {
			s := set.At()
			ts := &prompb.TimeSeries{}
			s.Labels().Range(func(l labels.Label) {
				ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value})
			})
			it = s.Iterator(it)
			for it.Next() == chunkenc.ValFloat {
				t, v := it.At()
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
			}
			result.Timeseries = append(result.Timeseries, ts)
		}
		if err := set.Err(); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				ae = engineError(err)
			}
			writeError(w, ae)
			return
		}
		resp.Results[i] = result
	}
	b, err := resp.Marshal()
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-protobuf")
	h.Set("Content-Encoding", "snappy")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(snappy.Encode(nil, b))
}
