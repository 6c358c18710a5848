package httpapi_test

import (
	"strings"
	"testing"
)

// The dashboard is mounted at / and /assets/; other methods get the API's
// 405 problem.
func TestDashboardIsMounted(t *testing.T) {
	s := newTestServer(t)
	status, ct, body := s.Do("GET", "/", "", "")
	if status != 200 || ct != "text/html; charset=utf-8" || !strings.Contains(string(body), `src="assets/app.js"`) {
		t.Fatalf("GET /: %d %s %.100s", status, ct, body)
	}
	if status, ct, _ := s.Do("GET", "/assets/app.js", "", ""); status != 200 || ct != "text/javascript; charset=utf-8" {
		t.Fatalf("GET /assets/app.js: %d %s", status, ct)
	}
	if status, _, _ := s.Do("HEAD", "/", "", ""); status != 200 {
		t.Fatalf("HEAD /: %d", status)
	}
	if status, ct, _ := s.Do("POST", "/", "text/plain", "x"); status != 405 || ct != "application/problem+json" {
		t.Fatalf("POST /: %d %s", status, ct)
	}
}
