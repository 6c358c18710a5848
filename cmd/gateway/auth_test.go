package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newToken runs `gateway token` and returns the token and its file line.
func newToken(t *testing.T, name, role string) (token, line string) {
	t.Helper()
	out := &lockedBuffer{}
	m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
	if code := m.Run(context.Background(), []string{"token", "--name", name, "--role", role}); code != 0 {
		t.Fatalf("gateway token: %d %s", code, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "token ") {
			token = lines[i+1]
		}
		if strings.HasPrefix(l, "  - {name: "+name+", role: "+role+", sha256: ") {
			line = l
		}
	}
	if token == "" || line == "" || strings.Contains(line, token) {
		t.Fatalf("gateway token printed:\n%s", out.String())
	}
	return token, line
}

func bearerGet(t *testing.T, url, token string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// The token printed by `gateway token` admits its client once its line is
// in the file; SIGHUP rotates tokens without a restart, and a broken file
// keeps the tokens in force.
func TestTokensFromTheFileAndRotationOnSIGHUP(t *testing.T) {
	first, firstLine := newToken(t, "grafana", "read")
	second, secondLine := newToken(t, "ops", "admin")
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n" + firstLine + "\n")
	base, stop := serve(t, map[string]string{"GATEWAY_DATA_DIR": t.TempDir(), "GATEWAY_AUTH_TOKENS": file})

	if status, h := bearerGet(t, base+"/v1/series", ""); status != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: %d %v", status, h)
	}
	for _, open := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/docs", "/"} {
		if status, _ := bearerGet(t, base+open, ""); status != 200 {
			t.Errorf("GET %s without a token: %d, want it open", open, status)
		}
	}
	if status, _ := bearerGet(t, base+"/v1/series", first); status != 200 {
		t.Fatalf("read token: %d", status)
	}

	hup := func() { _ = syscall.Kill(os.Getpid(), syscall.SIGHUP) }
	write("tokens:\n" + secondLine + "\n")
	hup()
	waitFor(t, "the rotated token", func() bool {
		s1, _ := bearerGet(t, base+"/v1/series", first)
		s2, _ := bearerGet(t, base+"/v1/series", second)
		return s1 == 401 && s2 == 200
	})
	write("tokens:\n  - {name: broken, role: root")
	hup()
	time.Sleep(200 * time.Millisecond)
	if status, _ := bearerGet(t, base+"/v1/series", second); status != 200 {
		t.Errorf("after a broken file: %d, want the tokens in force kept", status)
	}
	if code, out := stop(); code != 0 {
		t.Fatalf("serve exited with %d:\n%s", code, out)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWarnsWhenOpenBeyondLoopback(t *testing.T) {
	for addr, warn := range map[string]bool{"127.0.0.1:8080": false, "localhost:8080": false, "[::1]:8080": false,
		"0.0.0.0:8080": true, ":8080": true, "192.0.2.7:8080": true} {
		var b strings.Builder
		log := slog.New(slog.NewTextHandler(&b, nil))
		if _, err := loadTokens(context.Background(), defaultServeConfig().Auth, addr, log); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "without --auth-tokens"); got != warn {
			t.Errorf("%s: warned %v, want %v (%s)", addr, got, warn, b.String())
		}
	}
}

func TestTokenCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"token"}, {"token", "--name", "x", "--role", "root"}} {
		out := &lockedBuffer{}
		m := Main{Stdout: out, Stderr: out, LookupEnv: func(string) (string, bool) { return "", false }}
		if code := m.Run(context.Background(), args); code == 0 {
			t.Errorf("%v: exit 0: %s", args, out.String())
		}
	}
}
