package httpapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestNegotiateEncoding(t *testing.T) {
	cases := map[string]string{
		"":                             "",
		"identity":                     "",
		"gzip":                         "gzip",
		"x-gzip":                       "gzip",
		"zstd":                         "zstd",
		"gzip, deflate, br, zstd":      "zstd",
		"gzip;q=1, zstd;q=0.5":         "gzip",
		"GZIP;Q=0.3, zstd;q=0.2":       "gzip",
		"zstd;q=0, gzip":               "gzip",
		"zstd;q=0, gzip;q=0":           "",
		"*":                            "zstd",
		"*;q=0.5, zstd;q=0":            "gzip",
		"br, deflate":                  "",
		"gzip;q=abc":                   "",
		"gzip ; q=0.8 , zstd ; q=0.9 ": "zstd",
	}
	for accept, want := range cases {
		if got := negotiateEncoding(accept); got != want {
			t.Errorf("Accept-Encoding %q: %q, want %q", accept, got, want)
		}
	}
}

// A streaming answer that flushes reaches the client, decodable, before
// the handler returns, however small it is so far; the rest follows and
// the whole decodes to what was written.
func TestCompressFlushes(t *testing.T) {
	for _, coding := range []string{"gzip", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			release := make(chan struct{})
			h := (&Server{}).compress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"first":true,`)
				if err := http.NewResponseController(w).Flush(); err != nil {
					t.Errorf("flush: %v", err)
				}
				<-release
				_, _ = io.WriteString(w, `"rest":"`+strings.Repeat("x", 5000)+`"}`)
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL, nil)
			req.Header.Set("Accept-Encoding", coding)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.Header.Get("Content-Encoding") != coding {
				close(release)
				t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			var rd io.Reader
			if coding == "gzip" {
				zr, err := gzip.NewReader(resp.Body)
				if err != nil {
					close(release)
					t.Fatal(err)
				}
				rd = zr
			} else {
				zr, err := zstd.NewReader(resp.Body)
				if err != nil {
					close(release)
					t.Fatal(err)
				}
				defer zr.Close()
				rd = zr
			}
			first := make([]byte, len(`{"first":true,`))
			if _, err := io.ReadFull(rd, first); err != nil || string(first) != `{"first":true,` {
				close(release)
				t.Fatalf("before the handler returned: %q %v", first, err)
			}
			close(release)
			rest, err := io.ReadAll(rd)
			if err != nil || string(rest) != `"rest":"`+strings.Repeat("x", 5000)+`"}` {
				t.Fatalf("rest: %d bytes, %v", len(rest), err)
			}
		})
	}
}

// Encoders come back from their pools clean: answers made one after the
// other with the same pooled encoder each decode to their own bytes.
func TestCompressReusesEncoders(t *testing.T) {
	h := (&Server{}).compress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat(r.URL.Query().Get("c"), 3000))
	}))
	for i := range 20 {
		coding := []string{"gzip", "zstd"}[i%2]
		c := string(rune('a' + i))
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/?c="+c, nil)
		req.Header.Set("Accept-Encoding", coding)
		h.ServeHTTP(rec, req)
		var out []byte
		var err error
		if coding == "gzip" {
			var zr *gzip.Reader
			if zr, err = gzip.NewReader(bytes.NewReader(rec.Body.Bytes())); err == nil {
				out, err = io.ReadAll(zr)
			}
		} else {
			var zr *zstd.Decoder
			if zr, err = zstd.NewReader(bytes.NewReader(rec.Body.Bytes())); err == nil {
				out, err = io.ReadAll(zr)
				zr.Close()
			}
		}
		if err != nil || string(out) != strings.Repeat(c, 3000) {
			t.Fatalf("answer %d (%s): %v, %d bytes", i, coding, err, len(out))
		}
	}
}

// A compressed answer keeps no header that describes the bytes as the
// handler wrote them: length, byte ranges, a strong validator.
func TestCompressAdjustsHeaders(t *testing.T) {
	h := (&Server{}).compress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		w.Header().Set("Content-Length", "4000")
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("ETag", `"v1"`)
		_, _ = io.WriteString(w, strings.Repeat("a{b:c}", 4000/6)+"aaaa")
	}))
	for _, accept := range []string{"gzip", ""} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/app.css", nil)
		req.Header.Set("Accept-Encoding", accept)
		h.ServeHTTP(rec, req)
		got := rec.Result().Header
		if accept == "" {
			if got.Get("Content-Encoding") != "" || got.Get("Content-Length") != "4000" || got.Get("ETag") != `"v1"` || got.Get("Accept-Ranges") != "bytes" {
				t.Errorf("uncompressed: headers %v", got)
			}
			continue
		}
		if got.Get("Content-Encoding") != "gzip" || got.Get("Content-Length") != "" || got.Get("ETag") != `W/"v1"` || got.Get("Accept-Ranges") != "" {
			t.Errorf("compressed: headers %v", got)
		}
	}
}
