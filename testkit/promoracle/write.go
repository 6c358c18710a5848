package promoracle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// Encode returns the body of a remote-write request: the protobuf
// WriteRequest, compressed in snappy's block format.
//
// The compression is klauspost/compress's snappy package, a drop-in
// replacement for github.com/golang/snappy that writes the same block
// format: it is a direct dependency of the module already, and it is not
// the encoder Prometheus itself uses (golang/snappy), so a receiver that
// accepts these bodies accepts snappy, not one library's output.
func Encode(req *prompb.WriteRequest) ([]byte, error) {
	pb, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	return snappy.Encode(nil, pb), nil
}

// Decode is Encode's inverse.
func Decode(body []byte) (*prompb.WriteRequest, error) {
	pb, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, err
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(pb); err != nil {
		return nil, err
	}
	return &req, nil
}

// Retry bounds how long a write keeps retrying 5xx and 429 answers.
var Retry = struct {
	First, Max time.Duration
	Attempts   int
}{First: 100 * time.Millisecond, Max: 2 * time.Second, Attempts: 20}

// Write posts one remote-write body to url as Prometheus does (remote
// write 1.0 headers), retrying as Prometheus does on 5xx and 429 answers
// and on connection errors; any other answer than 204 No Content is an
// error that quotes the body.
func Write(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) error {
	wait := Retry.First
	var last error
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
		req.Header.Set("User-Agent", "tsgate-promoracle")
		resp, err := client.Do(req)
		retry := false
		if err != nil {
			last, retry = err, ctx.Err() == nil
		} else {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusNoContent:
				return nil
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
				last, retry = fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg))), true
			default:
				return fmt.Errorf("POST %s: %s, want 204 No Content: %s", url, resp.Status, strings.TrimSpace(string(msg)))
			}
		}
		if !retry || attempt >= Retry.Attempts {
			return fmt.Errorf("after %d attempts: %w", attempt, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(wait):
		}
		wait = min(2*wait, Retry.Max)
	}
}

// Send writes the whole set to url, slice after slice of ten minutes.
func (s *Set) Send(ctx context.Context, client *http.Client, url string, header http.Header) error {
	for i, req := range s.WriteRequests(10 * time.Minute) {
		body, err := Encode(req)
		if err != nil {
			return err
		}
		if err := Write(ctx, client, url, header, body); err != nil {
			return fmt.Errorf("request %d of the sample set: %w", i+1, err)
		}
	}
	return nil
}
