package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingBody is an endless body of one line repeated, counting what the
// client sent of it.
type countingBody struct {
	line []byte
	sent atomic.Int64
	max  int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	if c.sent.Load() >= c.max {
		return 0, io.EOF
	}
	n := 0
	for n+len(c.line) <= len(p) {
		n += copy(p[n:], c.line)
	}
	c.sent.Add(int64(n))
	return n, nil
}

// A write body far over the limit is refused having read little more than
// the limit: no layer before the handler reads it whole (the contract's
// security check read every body into memory, whatever its size).
func TestOversizedWriteBodiesAreNotReadWhole(t *testing.T) {
	s := newTestServer(t)
	const limit, sent = 16 << 20, 128 << 20 // the default --max-body-bytes
	for _, c := range []struct{ path, ct string }{
		{"/v1/points", "application/x-ndjson"},
		{"/v1/import", "application/x-ndjson"},
	} {
		body := &countingBody{line: []byte(`{"series":"big","t":1700000000000,"v":1}` + "\n"), max: sent}
		req, err := http.NewRequest("POST", s.URL+c.path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", c.ct)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Fatalf("%s: %d %s, want 413", c.path, resp.StatusCode, b)
			}
		} else if !strings.Contains(err.Error(), "broken pipe") && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("%s: %v", c.path, err)
		}
		if n := body.sent.Load(); n > limit+limit/2 {
			t.Fatalf("%s: the client sent %d MiB before the answer, the limit is %d MiB", c.path, n>>20, limit>>20)
		}
	}
}
