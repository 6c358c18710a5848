package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/tsgate/tsgate/failure"
	"github.com/tsgate/tsgate/ingest"
)

// pointDecoder reads a body of points at the clock now.
type pointDecoder = func(r io.Reader, now int64) (ingest.Batch, error)

// decodePoints reads the batch of a write route: the decoder of its
// declared media type (one of decoders), the body bounded by the size
// limit. On a refused batch, check completes the decoder's errors with the
// route's own checks of the points that did decode, so that one answer
// names every bad point; want says which media types the route takes. It
// answers the problem itself when ok is false.
func (s *Server) decodePoints(w http.ResponseWriter, r *http.Request, decoders map[string]pointDecoder, want string, check func(*ingest.ValidationError)) (batch ingest.Batch, ok bool) {
	decode := decoders[mediaType(r)]
	if decode == nil {
		s.refuseProblem(w, r, unsupportedMedia(want, r.Header.Get("Content-Type")))
		return ingest.Batch{}, false
	}
	batch, err := decode(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), s.deps.Now().UnixMilli())
	if err != nil {
		var ve *ingest.ValidationError
		if errors.As(err, &ve) {
			check(ve)
		}
		s.writeProblem(w, r, err)
		return ingest.Batch{}, false
	}
	return batch, true
}

// writeFailed answers a write the store did not take: a refused batch as
// the problem it is, anything else as the store being unavailable.
func (s *Server) writeFailed(w http.ResponseWriter, r *http.Request, err error) {
	var ve *ingest.ValidationError
	if !errors.As(err, &ve) {
		err = failure.Mark(err, failure.Unavailable)
	}
	s.writeProblem(w, r, err)
}
