// Package web is the dashboard the gateway serves at GET /: one HTML page,
// a style sheet and a few ES modules, embedded in the binary and needing no
// build step, no CDN and no font service, so that it works on an air-gapped
// host. The page talks to the v1 API of the same origin.
//
// Assets are served with Cache-Control: no-cache and a strong ETag (a hash
// of the content): a browser revalidates on each load and gets 304 Not
// Modified until the gateway is upgraded, so a new release is never mixed
// with cached modules of an old one.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// contentTypes maps the extensions of the embedded files to their media
// types. The table is explicit rather than mime.TypeByExtension, which
// consults the host's tables (some map .js to text/plain, which browsers
// refuse for modules).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// contentSecurityPolicy keeps the page to its own origin: no inline
// script, no third-party fetches.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	etag        string
	contentType string
}

// assets are the served files by URL path, built once from the embedded
// tree: "/" is index.html, everything under static/assets is /assets/....
var assets = func() map[string]*asset {
	m := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil // not served
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a := &asset{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		urlPath := strings.TrimPrefix(p, "static")
		if urlPath == "/index.html" {
			urlPath = "/"
		}
		m[urlPath] = a
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error())
	}
	return m
}()

// Handler serves the dashboard: index.html at / and the files under
// /assets/. Other paths are 404. Mount it at "/" and "/assets/*".
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/index.html" {
		p = "/"
	}
	a, ok := assets[p]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.Method+" is not allowed on "+r.URL.Path, http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	if p == "/" {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
	}
	// ServeContent answers If-None-Match with 304, HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
