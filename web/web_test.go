package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIndexIsServedAtRoot(t *testing.T) {
	h := Handler()
	resp := get(t, h, "GET", "/")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("GET /: Content-Type %q", ct)
	}
	b := body(t, resp)
	if !strings.HasPrefix(b, "<!doctype html>") || !strings.Contains(b, "<canvas") {
		t.Fatalf("GET / is not the dashboard:\n%.200s", b)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Fatalf("Cache-Control %q", cc)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}
	// /index.html is the same page.
	if resp := get(t, h, "GET", "/index.html"); resp.StatusCode != 200 || body(t, resp) != b {
		t.Fatalf("GET /index.html: %d", resp.StatusCode)
	}
}

func TestRevalidationByETag(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/assets/app.js"} {
		resp := get(t, h, "GET", p)
		etag := resp.Header.Get("ETag")
		if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
			t.Fatalf("%s: ETag %q", p, etag)
		}
		again := get(t, h, "GET", p, "If-None-Match", etag)
		if again.StatusCode != http.StatusNotModified || body(t, again) != "" {
			t.Fatalf("%s with If-None-Match: %d", p, again.StatusCode)
		}
		if changed := get(t, h, "GET", p, "If-None-Match", `"other"`); changed.StatusCode != 200 {
			t.Fatalf("%s with a stale ETag: %d", p, changed.StatusCode)
		}
		if head := get(t, h, "HEAD", p); head.StatusCode != 200 || head.Header.Get("ETag") != etag {
			t.Fatalf("HEAD %s: %d", p, head.StatusCode)
		}
	}
}

var wantType = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

// Every file the page loads — by src= and href= in index.html, and by
// import in the modules — is served with the type browsers require.
func TestReferencedAssetsAreServed(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, "GET", "/"))
	base, _ := url.Parse("http://gateway/")
	refs := regexp.MustCompile(`\b(?:src|href)="([^"]*)"`).FindAllStringSubmatch(index, -1)
	if len(refs) == 0 {
		t.Fatal("index.html references nothing")
	}
	var queue []string
	for _, m := range refs {
		u, err := base.Parse(m[1])
		if err != nil || u.Host != "gateway" {
			t.Errorf("index.html refers outside the gateway: %q", m[1])
			continue
		}
		if strings.HasPrefix(u.Path, "/assets/") {
			queue = append(queue, u.Path)
		}
	}
	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^"']*?\bfrom\s*["']([^"']+)["']`)
	seen := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		resp := get(t, h, "GET", p)
		b := body(t, resp)
		ct := resp.Header.Get("Content-Type")
		if resp.StatusCode != 200 || ct != wantType[path.Ext(p)] || len(b) == 0 {
			t.Errorf("GET %s: %d, Content-Type %q, %d bytes", p, resp.StatusCode, ct, len(b))
			continue
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
		if path.Ext(p) == ".js" {
			for _, m := range imports.FindAllStringSubmatch(b, -1) {
				if !strings.HasPrefix(m[1], "./") {
					t.Errorf("%s imports %q: only relative imports of the embedded modules work", p, m[1])
					continue
				}
				queue = append(queue, path.Join(path.Dir(p), m[1]))
			}
		}
	}
	for _, p := range []string{"/assets/app.js", "/assets/lib.js", "/assets/chart.js", "/assets/api.js", "/assets/app.css"} {
		if !seen[p] {
			t.Errorf("%s is not reached from index.html", p)
		}
	}
}

func TestOtherPathsAndMethods(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/assets/", "/assets/nope.js", "/assets/../web.go", "/static/index.html", "/favicon.ico"} {
		if resp := get(t, h, "GET", p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp := get(t, h, "POST", "/"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// The gateway may run air-gapped: nothing in the assets may load from
// elsewhere. URLs in comments are fine; an XML namespace is a name, not a
// location.
func TestNoExternalURLs(t *testing.T) {
	blockComments := regexp.MustCompile(`(?s)/\*.*?\*/|<!--.*?-->`)
	lineComments := regexp.MustCompile(`(?m)(^|[\s;{}(),])//.*$`)
	namespaces := strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "")
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		code := blockComments.ReplaceAllString(string(b), "")
		if path.Ext(p) == ".js" {
			code = lineComments.ReplaceAllString(code, "$1")
		}
		code = namespaces.Replace(code)
		for _, m := range regexp.MustCompile(`(?i)https?://[^\s"'<>)]*`).FindAllString(code, -1) {
			t.Errorf("%s refers to %s", p, m)
		}
		if strings.Contains(code, "@import") || regexp.MustCompile(`url\(\s*["']?//`).MatchString(code) {
			t.Errorf("%s loads a style sheet or resource from elsewhere", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The page stays small: it is read over whatever link reaches the gateway.
func TestAssetBudget(t *testing.T) {
	const budget = 150 << 10
	total := 0
	for _, a := range assets {
		total += len(a.body)
	}
	if total > budget {
		t.Fatalf("the assets hold %d bytes, over the budget of %d", total, budget)
	}
	t.Logf("assets: %d files, %d bytes", len(assets), total)
}
