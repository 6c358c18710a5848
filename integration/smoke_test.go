//go:build integration

package integration

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// frameVersions records the protocol versions of the RESULT frames a session receives.
type frameVersions struct {
	mu       sync.Mutex
	results  int
	versions []int
}

func (f *frameVersions) ObserveFrameHeader(_ context.Context, h gocql.ObservedFrameHeader) {
	const opResult = 0x08
	if byte(h.Opcode) != opResult {
		return
	}
	v := int(byte(h.Version) & 0x7f) // the high bit marks a response
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results++
	if !slices.Contains(f.versions, v) {
		f.versions = append(f.versions, v)
	}
}

func (f *frameVersions) seen() (results int, versions []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.results, slices.Clone(f.versions)
}

// TestCassandraRoundTrip checks the basics everything else relies on: the
// server version, the negotiated native protocol, and that rows written to a
// time-series shaped table read back exactly, in clustering order, across pages.
func TestCassandraRoundTrip(t *testing.T) {
	frames := &frameVersions{}
	cluster := newCluster()
	cluster.FrameHeaderObserver = frames
	s, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(s.Close)
	ctx := testContext(t)

	var release string
	if err := s.Query("SELECT release_version FROM system.local").ScanContext(ctx, &release); err != nil {
		t.Fatalf("read release_version: %v", err)
	}
	if !strings.HasPrefix(release, "5.") {
		t.Fatalf("release_version = %q, want 5.x", release)
	}
	t.Logf("Cassandra %s", release)

	// The driver does not report the negotiated native protocol version
	// directly, but each response frame header carries it.
	results, versions := frames.seen()
	if results == 0 {
		t.Fatal("no RESULT frames observed")
	}
	if len(versions) != 1 || versions[0] != 5 {
		t.Fatalf("RESULT frames used native protocol versions %v, want only v5", versions)
	}

	ks := newKeyspace(t, s)
	table := ks + ".points"
	if err := s.Query(fmt.Sprintf(`CREATE TABLE %s (
		series text,
		ts     timestamp,
		value  double,
		note   text,
		PRIMARY KEY ((series), ts)
	) WITH CLUSTERING ORDER BY (ts DESC)`, table)).ExecContext(ctx); err != nil {
		t.Fatalf("create table: %v", err)
	}

	type point struct {
		ts    time.Time
		value float64
		note  string
	}
	// Cassandra timestamps have millisecond precision.
	base := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	series := []string{"cpu.user", "cpu.system"}
	want := map[string][]point{}
	for si, name := range series {
		for i := 0; i < 50; i++ {
			p := point{
				ts:    base.Add(time.Duration(i) * 10 * time.Second),
				value: float64(si*1000+i) + 0.25,
				note:  fmt.Sprintf("%s#%d", name, i),
			}
			if i == 7 {
				p.value = math.Inf(1)
			}
			want[name] = append(want[name], p)
			if err := s.Query("INSERT INTO "+table+" (series, ts, value, note) VALUES (?, ?, ?, ?)",
				name, p.ts, p.value, p.note).ExecContext(ctx); err != nil {
				t.Fatalf("insert %s %d: %v", name, i, err)
			}
		}
	}

	for _, name := range series {
		// Read a window [ts[5], ts[45]) back with a small page size so the
		// result spans several pages; rows come newest first.
		from, to := want[name][5].ts, want[name][45].ts
		iter := s.Query("SELECT ts, value, note FROM "+table+" WHERE series = ? AND ts >= ? AND ts < ?",
			name, from, to).PageSize(7).IterContext(ctx)
		var got []point
		var p point
		for iter.Scan(&p.ts, &p.value, &p.note) {
			got = append(got, p)
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("select %s: %v", name, err)
		}
		if len(got) != 40 {
			t.Fatalf("%s: got %d rows, want 40", name, len(got))
		}
		for i, g := range got {
			w := want[name][44-i]
			if !g.ts.Equal(w.ts) || g.value != w.value || g.note != w.note {
				t.Errorf("%s row %d = {%s %v %q}, want {%s %v %q}", name, i,
					g.ts.UTC().Format(time.RFC3339Nano), g.value, g.note,
					w.ts.Format(time.RFC3339Nano), w.value, w.note)
			}
		}
	}

	var n int
	if err := s.Query("SELECT COUNT(*) FROM "+table).ScanContext(ctx, &n); err != nil {
		t.Fatalf("count: %v", err)
	}
	if n != 100 {
		t.Fatalf("count = %d, want 100", n)
	}
}
