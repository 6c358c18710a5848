package kafkaingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tsgate/tsgate/ingest"
	"github.com/tsgate/tsgate/params"
)

// decoder reads the points of one record's value at the clock now (Unix
// milliseconds, for relative times), with the validation of the HTTP
// write routes.
type decoder = func(r io.Reader, now int64) (ingest.Batch, error)

// Media types of records, from their content-type header.
const (
	mediaJSON   = "application/json"
	mediaNDJSON = "application/x-ndjson"
	// mediaRemoteWrite is a Prometheus remote-write body (snappy
	// protobuf WriteRequest).
	mediaRemoteWrite = "application/x-protobuf"
)

// decoders are the record formats, by media type: the /v1/points forms
// (labels given by series_labels or label lines), and Prometheus
// remote-write bodies, decoded by the decoders of the HTTP writes. A
// media type mapped to nil is known but has no decoder: its records go
// to the dead-letter topic saying so (see unsupported).
var decoders = map[string]decoder{
	mediaJSON:        ingest.DecodeJSON,
	mediaNDJSON:      ingest.DecodeNDJSON,
	mediaRemoteWrite: decodeRemoteWrite,
}

// unsupported says why a known media type without a decoder is refused.
var unsupported = map[string]string{}

// decodeRemoteWrite reads a remote-write body as the HTTP route does;
// staleness markers are kept and other non-finite values left out, as
// there.
func decodeRemoteWrite(r io.Reader, _ int64) (ingest.Batch, error) {
	rw, err := ingest.DecodeRemoteWrite(r)
	if err != nil {
		return ingest.Batch{}, err
	}
	if len(rw.Points) == 0 {
		return ingest.Batch{}, &ingest.ValidationError{Errors: []params.Error{{Param: "body", Message: "no sample that can be stored"}}}
	}
	return rw.Batch, nil
}

// headerContentType is the record header that names its media type.
const headerContentType = "content-type"

// mediaError refuses a record whose media type has no decoder.
type mediaError struct{ msg string }

func (e *mediaError) Error() string { return e.msg }

// decodeRecord returns the points of a record. It is the one place where
// a record's content-type header picks its decoder; without the header,
// a value whose object starts with a "points" member is JSON and anything
// else NDJSON. Decoders return *ingest.ValidationError for bad input;
// an unknown or unsupported media type is a *mediaError. Both mean the
// record can never be written.
func decodeRecord(rec *kgo.Record, now int64) (ingest.Batch, error) {
	media, err := recordMedia(rec)
	if err != nil {
		return ingest.Batch{}, err
	}
	decode, known := decoders[media]
	switch {
	case !known:
		return ingest.Batch{}, &mediaError{fmt.Sprintf("content-type %q is not a point format; send application/json, application/x-ndjson or application/x-protobuf (a Prometheus remote-write body)", media)}
	case decode == nil:
		return ingest.Batch{}, &mediaError{unsupported[media]}
	}
	return decode(bytes.NewReader(rec.Value), now)
}

// recordMedia is the media type of a record: its content-type header
// without parameters, or sniffed from the value.
func recordMedia(rec *kgo.Record) (string, error) {
	for _, h := range rec.Headers {
		if !strings.EqualFold(h.Key, headerContentType) {
			continue
		}
		media, _, err := mime.ParseMediaType(string(h.Value))
		if err != nil {
			return "", &mediaError{fmt.Sprintf("content-type %q: %v", h.Value, err)}
		}
		return media, nil
	}
	return sniff(rec.Value), nil
}

// sniff tells a {"points": [...]} body from NDJSON lines: the first is an
// object whose first member is "points".
func sniff(value []byte) string {
	dec := json.NewDecoder(bytes.NewReader(value))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return mediaNDJSON
	}
	if tok, err := dec.Token(); err == nil && tok == "points" {
		return mediaJSON
	}
	return mediaNDJSON
}
