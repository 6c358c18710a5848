package httpapi

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/tsgate/tsgate/problem"
)

// compressMinBytes is the smallest answer worth compressing: below it the
// encoding's framing and the client's work cost more than the bytes saved.
const compressMinBytes = 1024

// zstdWindow bounds the window of zstd answers. RFC 9659 asks HTTP
// encoders to stay within 8 MiB so that every decoder can read them; a
// smaller window also keeps each pooled encoder small.
const zstdWindow = 1 << 21

// compress negotiates the content coding of answers and decodes request
// bodies. Answers of at least compressMinBytes whose type is text are
// compressed with zstd or gzip when the request's Accept-Encoding allows
// it; they stream as they are written, and a Flush pushes out what the
// encoder holds. A request body sent with Content-Encoding: gzip is
// inflated before any handler reads it, so the handlers' body limits bound
// the inflated size (a small body that inflates beyond them is a 413);
// any other coding is refused with 415.
func (s *Server) compress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch ce := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); ce {
		case "", "identity":
		case "snappy":
			// Prometheus' remote write and read send snappy blocks, which
			// their handlers decode themselves, bounded; nothing else
			// takes them.
			if r.URL.Path != "/prometheus/api/v1/write" && r.URL.Path != "/prometheus/api/v1/read" {
				s.refuserOf(r.URL.Path)(w, problem.New(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
					"snappy bodies are taken by Prometheus remote write and read only; send the body uncompressed or with Content-Encoding: gzip"))
				return
			}
		case "gzip", "x-gzip":
			r.Body = &gzipBody{src: r.Body}
			r.Header.Del("Content-Encoding")
			r.Header.Del("Content-Length")
			r.ContentLength = -1
		default:
			s.refuserOf(r.URL.Path)(w, problem.New(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
				"send the body uncompressed or with Content-Encoding: gzip (Content-Encoding was "+strconv.Quote(ce)+")"))
			return
		}
		w.Header().Add("Vary", "Accept-Encoding")
		enc := negotiateEncoding(r.Header.Get("Accept-Encoding"))
		if enc == "" || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w, coding: enc}
		aborted := true
		defer func() {
			// A handler that panicked (http.ErrAbortHandler past the
			// recoverer) ends the connection: nothing more is written.
			if aborted {
				cw.release()
			}
		}()
		next.ServeHTTP(cw, r)
		cw.close()
		aborted = false
	})
}

// negotiateEncoding picks the coding of an answer from Accept-Encoding:
// the acceptable one of highest q, zstd before gzip when equal; "" for
// identity. "*" stands for both.
func negotiateEncoding(accept string) string {
	if accept == "" {
		return ""
	}
	q := map[string]float64{}
	for _, part := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		weight := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(strings.ToLower(k)) == "q" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				continue
			}
			weight = f
		}
		switch name {
		case "x-gzip":
			name = "gzip"
		case "*":
			for _, n := range []string{"zstd", "gzip"} {
				if _, named := q[n]; !named {
					q["*"+n] = weight
				}
			}
			continue
		}
		q[name] = weight
	}
	best, bestQ := "", 0.0
	for _, n := range []string{"zstd", "gzip"} {
		w, ok := q[n]
		if !ok {
			w, ok = q["*"+n]
		}
		if ok && w > bestQ {
			best, bestQ = n, w
		}
	}
	return best
}

// compressible reports whether an answer of this type shrinks when
// compressed: JSON, YAML, HTML and other text.
func compressible(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "yaml") ||
		mt == "application/javascript" || mt == "image/svg+xml" || mt == "application/x-ndjson"
}

// compressWriter holds the start of an answer until it knows whether to
// compress it: when compressMinBytes are written, when the handler
// flushes (a streaming answer is compressed whatever its size), or when
// the handler returns (a short answer is sent as it is).
type compressWriter struct {
	http.ResponseWriter
	coding  string
	status  int
	buf     []byte
	decided bool
	enc     encoder // nil: the answer is sent as it is
}

type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

// The encoders' levels: gzip at its fastest, since an answer is compressed
// on the read's own path and gzip's default level took twice the CPU for
// 9 % fewer bytes (BenchmarkCompressedPage); zstd at its default, whose
// fastest level saved a tenth of the time for 23 % more bytes.
var (
	gzipPool = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return w
	}}
	zstdPool = sync.Pool{New: func() any {
		w, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindow))
		return w
	}}
)

func (c *compressWriter) WriteHeader(status int) {
	if c.status != 0 || c.decided {
		return
	}
	c.status = status
	if status < 200 || status == http.StatusNoContent || status == http.StatusNotModified {
		// Nothing is buffered yet: there is no write to fail.
		_ = c.decide(false)
	}
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.decided {
		if c.enc != nil {
			return c.enc.Write(p)
		}
		return c.ResponseWriter.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= compressMinBytes {
		if err := c.decide(true); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush sends what was written so far, compressed if the answer is.
func (c *compressWriter) Flush() {
	if !c.decided {
		if c.status == 0 {
			c.status = http.StatusOK
		}
		_ = c.decide(true)
	}
	if c.enc != nil {
		_ = c.enc.Flush()
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *compressWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// decide sends the header, with a Content-Encoding if the answer is to be
// compressed (large is whether it is big enough), and what is buffered.
func (c *compressWriter) decide(large bool) error {
	c.decided = true
	h := c.Header()
	if large && c.status >= 200 && c.status != http.StatusPartialContent && h.Get("Content-Encoding") == "" &&
		compressible(h.Get("Content-Type")) {
		h.Set("Content-Encoding", c.coding)
		h.Del("Content-Length")
		// Byte ranges and a strong validator describe the bytes as the
		// handler wrote them, not as they are sent.
		h.Del("Accept-Ranges")
		if etag := h.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
			h.Set("ETag", "W/"+etag)
		}
		if c.coding == "zstd" {
			c.enc = zstdPool.Get().(*zstd.Encoder)
		} else {
			c.enc = gzipPool.Get().(*gzip.Writer)
		}
		c.enc.Reset(c.ResponseWriter)
	}
	c.ResponseWriter.WriteHeader(c.status)
	buf := c.buf
	c.buf = nil
	if len(buf) == 0 {
		return nil
	}
	var err error
	if c.enc != nil {
		_, err = c.enc.Write(buf)
	} else {
		_, err = c.ResponseWriter.Write(buf)
	}
	return err
}

// close ends the answer once the handler has returned.
func (c *compressWriter) close() {
	if !c.decided {
		if c.status == 0 {
			return // nothing written: the server answers an empty 200
		}
		_ = c.decide(false)
	}
	if c.enc != nil {
		_ = c.enc.Close()
	}
	c.release()
}

// release returns the encoder to its pool.
func (c *compressWriter) release() {
	switch e := c.enc.(type) {
	case *gzip.Writer:
		e.Reset(io.Discard)
		gzipPool.Put(e)
	case *zstd.Encoder:
		e.Reset(io.Discard)
		zstdPool.Put(e)
	}
	c.enc = nil
}

// gzipBody inflates a request body as it is read. The reader is made on
// the first read, so that a body that is not gzip fails where the handler
// reads it, as any unreadable body does: with a 400 naming the body.
type gzipBody struct {
	src io.ReadCloser
	zr  *gzip.Reader
	err error
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.zr == nil && b.err == nil {
		b.zr, b.err = gzip.NewReader(b.src)
		if b.err != nil {
			b.err = notGzip(b.err)
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.zr.Read(p)
	if err != nil && err != io.EOF {
		err = notGzip(err)
	}
	return n, err
}

func (b *gzipBody) Close() error { return b.src.Close() }

// notGzip is the problem of a body sent as gzip that does not inflate.
func notGzip(err error) *problem.Problem {
	msg := "does not inflate as gzip: " + err.Error()
	p := problem.New(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "body: "+msg)
	p.Errors = []problem.ParamError{{Param: "body", Message: msg}}
	return p
}
