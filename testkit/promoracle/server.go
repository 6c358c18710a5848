package promoracle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// script is scripts/prometheus.sh of this checkout.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "prometheus.sh")
}

// FromEnv is the Prometheus server of PROMETHEUS_URL, which
// scripts/prometheus.sh run sets; the test fails without it.
func FromEnv(t testing.TB) *Target {
	t.Helper()
	u := os.Getenv("PROMETHEUS_URL")
	if u == "" {
		t.Fatal("PROMETHEUS_URL is not set; run under scripts/prometheus.sh run (make integration-test does)")
	}
	return Prometheus("prometheus", u)
}

// ServerOptions configure a server of StartServer.
type ServerOptions struct {
	// Scrape is host:port of a target whose /metrics the server scrapes
	// every second (job "tsgate"); none when empty.
	Scrape string
	// RemoteWrite is a URL the server remote-writes what it ingests to.
	RemoteWrite string
}

// StartServer starts a Prometheus server of the test's own with
// scripts/prometheus.sh (which installs Debian's package when it is
// missing): its cache directory under the test's temporary directory, a
// free port. It is stopped when the test ends, its log shown if the test
// failed.
func StartServer(t testing.TB, opts ServerOptions) *Target {
	t.Helper()
	home := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	env := append(os.Environ(), "PROMETHEUS_HOME_CACHE="+home, "PROMETHEUS_PORT="+port,
		"PROMETHEUS_SCRAPE="+opts.Scrape, "PROMETHEUS_REMOTE_WRITE="+opts.RemoteWrite)
	run := func(arg string) ([]byte, error) {
		cmd := exec.Command(script(), arg)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	out, err := run("start")
	t.Cleanup(func() {
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(home, "logs", "prometheus.log")); err == nil {
				t.Logf("log of the Prometheus server on port %s:\n%s", port, tail(string(log), 40))
			}
		}
		if out, err := run("stop"); err != nil {
			t.Errorf("scripts/prometheus.sh stop: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("scripts/prometheus.sh start: %v\n%s", err, out)
	}
	return Prometheus("prometheus:"+port, "http://127.0.0.1:"+port)
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// CheckScrape has a Prometheus server of the test's own scrape the
// gateway at gatewayURL every second and remote-write what it scrapes
// into that gateway, and checks what comes back through the gateway's
// PromQL API: the gateway's own request counter, as Prometheus labels it
// (job "tsgate", the instance), and the very samples the server holds,
// raw, once remote write has caught up. The server must also count no
// sample or metadata it failed to send: the gateway took every request,
// metadata-only ones included.
func CheckScrape(t *testing.T, gatewayURL string) {
	t.Helper()
	u, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	gw := Gateway("gateway", gatewayURL)
	prom := StartServer(t, ServerOptions{Scrape: u.Host, RemoteWrite: gw.Write})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	counter := fmt.Sprintf(`tsgate_http_requests_total{job="tsgate", instance=%q}`, u.Host)
	var found model.Vector
	waitFor(t, 60*time.Second, "the gateway to answer "+counter, func() error {
		v, err := gw.Query(ctx, counter, time.Now())
		if err != nil {
			return err
		}
		if vec, ok := v.(model.Vector); ok && len(vec) > 0 {
			found = vec
			return nil
		}
		return fmt.Errorf("no series yet: %v", v)
	})
	t.Logf("the gateway answers %d series of %s, e.g. %s", len(found), counter, found[0].Metric)

	// Raw samples of a window that ended a few seconds ago: both must
	// hold the same, once the gateway has received them. The first
	// seconds of the window are left out of the comparison: a sample on
	// its left bound is in it for Prometheus 2 and not for Prometheus 3.
	// The window moves on until Prometheus has scraped through it and
	// the gateway holds what Prometheus does.
	const window, margin = 20 * time.Second, 3 * time.Second
	expr := fmt.Sprintf(`{job="tsgate", instance=%q, __name__=~"up|scrape_samples_scraped|tsgate_http_requests_total|tsgate_build_info"}[%s]`,
		u.Host, model.Duration(window))
	var at time.Time
	var points int
	waitFor(t, 90*time.Second, "the gateway's samples to equal Prometheus' own", func() error {
		at = time.Now().Add(-4 * time.Second).Truncate(time.Second)
		want, err := prom.Query(ctx, expr, at)
		if err != nil {
			return err
		}
		got, err := gw.Query(ctx, expr, at)
		if err != nil {
			return err
		}
		cut := model.TimeFromUnixNano(at.Add(-window + margin).UnixNano())
		w, g := after(want, cut), after(got, cut)
		points = 0
		ups := 0
		for _, s := range w {
			points += len(s.Values)
			if s.Metric["__name__"] == "up" {
				ups = len(s.Values)
			}
		}
		// A scrape a second: a window of 17 s holds 16 or more.
		if ups < int((window-margin)/time.Second)-1 {
			return fmt.Errorf("Prometheus holds %d scrapes of %s at %s, not yet a whole window's", ups, u.Host, at.Format(time.RFC3339))
		}
		if diffs := CompareValues(w, g, Unordered); len(diffs) > 0 {
			return fmt.Errorf("%d differences, first: %s", len(diffs), diffs[0])
		}
		return nil
	})
	t.Logf("the gateway holds the %d samples Prometheus scraped in the %s before %s", points, window-margin, at.Format(time.RFC3339))

	m, err := scrapeMetrics(ctx, prom.API+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	sent := 0.0
	for name, v := range m {
		if strings.HasPrefix(name, "prometheus_remote_storage_samples_total{") {
			sent += v
		}
		if (strings.HasPrefix(name, "prometheus_remote_storage_samples_failed_total{") ||
			strings.HasPrefix(name, "prometheus_remote_storage_metadata_failed_total{")) && v != 0 {
			t.Errorf("Prometheus counts %s = %v: the gateway refused remote writes", name, v)
		}
	}
	if sent == 0 {
		t.Error("Prometheus counts no sample sent by remote write")
	}
	t.Logf("Prometheus sent %v samples by remote write", sent)
}

// after returns the points of a matrix later than cut.
func after(v model.Value, cut model.Time) model.Matrix {
	m, _ := v.(model.Matrix)
	var out model.Matrix
	for _, s := range m {
		var vals []model.SamplePair
		for _, p := range s.Values {
			if p.Timestamp > cut {
				vals = append(vals, p)
			}
		}
		if len(vals) > 0 {
			out = append(out, &model.SampleStream{Metric: s.Metric, Values: vals})
		}
	}
	return out
}

// waitFor calls check until it returns nil, failing the test with its
// last error after limit.
func waitFor(t testing.TB, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", limit, what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// scrapeMetrics reads a /metrics page: each sample line's value by its
// name and labels.
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil && i > 0 {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// SeriesIDs checks the ids the gateway at gatewayURL gave the set's
// series: GET /v1/series/{id} of the id the contract derives from each
// label set answers that series, with its labels and its first sample's
// time. It returns what differs.
func SeriesIDs(ctx context.Context, client *http.Client, gatewayURL string, header http.Header, s *Set) []string {
	var d diffList
	for _, sr := range s.Series {
		id := sr.Labels.SeriesID()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(gatewayURL, "/")+"/v1/series/"+url.PathEscape(id), nil)
		if err != nil {
			return []string{err.Error()}
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			d.add("GET /v1/series/%s: %v", id, err)
			continue
		}
		var got struct {
			ID     string            `json:"id"`
			First  int64             `json:"first"`
			Labels map[string]string `json:"labels"`
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			d.add("GET /v1/series/%s (the series %s): %s: %s", id, sr.Labels, resp.Status, strings.TrimSpace(string(body)))
			continue
		}
		if err := json.Unmarshal(body, &got); err != nil {
			d.add("GET /v1/series/%s: %v", id, err)
			continue
		}
		if got.ID != id || Labels(got.Labels).String() != sr.Labels.String() || got.First != sr.Samples[0].T {
			d.add("GET /v1/series/%s: id %s, labels %s, first %d; want labels %s, first %d",
				id, got.ID, Labels(got.Labels), got.First, sr.Labels, sr.Samples[0].T)
		}
	}
	return d.list()
}
