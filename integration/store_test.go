//go:build integration

package integration

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// storeConfig is the store's configuration for keyspace ks on the test
// cluster, replicated once in the coordinator's data center.
func storeConfig(t testing.TB, s *gocql.Session, ks string) cassandra.Config {
	t.Helper()
	var dc string
	if err := s.Query("SELECT data_center FROM system.local").ScanContext(testContext(t), &dc); err != nil {
		t.Fatalf("read local data center: %v", err)
	}
	cfg := cassandra.DefaultConfig()
	cfg.Hosts = hosts
	cfg.Keyspace = ks
	cfg.Consistency = "LOCAL_QUORUM"
	cfg.LocalDC = dc
	cfg.Replication = dc + ":1"
	// Expiry is decided by the clock the tests place their data by.
	cfg.Now = storetest.Start
	return cfg
}

// storeLogger logs the store's warnings to stderr; not through t.Log, since
// the driver may still log from its goroutines after a test has ended.
func storeLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestCassandraStoreConformance runs the store conformance suite, the one
// the embedded store passes too, against a fresh keyspace.
func TestCassandraStoreConformance(t *testing.T) {
	store := openStore(t)
	start := time.Now()
	storetest.Run(t, store, tiers.DefaultPyramid())
	t.Logf("conformance suite ran in %s", time.Since(start).Round(time.Millisecond))
}

// TestCassandraStoreConformanceSealedRowsDeletedAtOnce runs the suite with
// sealed partitions losing their rows in the seal itself, so that its
// sealing test reads partitions whose points are in chunks only, and rows
// written after a seal over them.
func TestCassandraStoreConformanceSealedRowsDeletedAtOnce(t *testing.T) {
	store, _, _ := freshStore(t, tiers.DefaultPyramid(), func(c *cassandra.Config) {
		c.SealedRowsGrace = 0
	})
	storetest.Run(t, store, tiers.DefaultPyramid())
}

// TestSpeculationWithOneNode runs the conformance suite with speculative
// reads after a nanosecond, on one node. A speculative attempt there finds
// no host, and the driver fails the whole read with "no hosts available"
// while the first attempt is still on its way: the store must not
// speculate with one node up (it failed before it counted nodes). The
// second defence, every read path sending a read that lost that race
// again without speculation (nodes can go down between the store's counts
// of them), is not reached here: with one node no read speculates.
func TestSpeculationWithOneNode(t *testing.T) {
	store, _, _ := freshStore(t, tiers.DefaultPyramid(), func(c *cassandra.Config) {
		c.SpeculativeDelay = time.Nanosecond
	})
	storetest.Run(t, store, tiers.DefaultPyramid())
	if err := store.Ping(testContext(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// TestCassandraSchema checks that Open refuses a keyspace without the
// store's tables, naming the command that creates them, and that applying
// the schema twice is harmless.
func TestCassandraSchema(t *testing.T) {
	s := newSession(t)
	ks := newKeyspace(t, s) // exists, but holds no tables
	cfg := storeConfig(t, s, ks)
	p := tiers.DefaultPyramid()
	ctx := testContext(t)

	missing := cfg
	missing.Keyspace = ks + "_none"
	for _, c := range []cassandra.Config{missing, cfg} {
		store, err := cassandra.Open(ctx, c, p, storeLogger())
		if err == nil {
			store.Close()
			t.Fatalf("Open of keyspace %s succeeded before the schema was applied", c.Keyspace)
		}
		if !strings.Contains(err.Error(), "gateway schema --apply") {
			t.Fatalf("Open of keyspace %s: error %q does not say to run `gateway schema --apply`", c.Keyspace, err)
		}
		t.Logf("Open of keyspace %s: %v", c.Keyspace, err)
	}

	for i := range 2 {
		if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
			t.Fatalf("apply schema, time %d: %v", i+1, err)
		}
	}
	store, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatalf("open after applying the schema: %v", err)
	}
	defer store.Close()
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}

	// Every statement Schema prints is the schema that got applied: the
	// tables and their options are what the package documents.
	var ttl, gcGrace int
	var compaction map[string]string
	err = s.Query("SELECT default_time_to_live, gc_grace_seconds, compaction FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
		ks, "points_raw").ScanContext(ctx, &ttl, &gcGrace, &compaction)
	if err != nil {
		t.Fatal(err)
	}
	if ttl != 7*24*3600 || gcGrace != 4*3600 || !strings.HasSuffix(compaction["class"], "TimeWindowCompactionStrategy") ||
		compaction["compaction_window_unit"] != "HOURS" || compaction["compaction_window_size"] != "1" {
		t.Fatalf("points_raw: default_time_to_live %d, gc_grace_seconds %d, compaction %v", ttl, gcGrace, compaction)
	}
}

// TestCassandraStoreRowTTL checks that a row carries the TTL that expires
// it at T + Retention, not the table's default.
func TestCassandraStoreRowTTL(t *testing.T) {
	store, s, cfg := freshStore(t, tiers.DefaultPyramid())
	ks := cfg.Keyspace
	ctx := testContext(t)
	now := storetest.Start().UnixMilli()
	key := tiers.PartitionKey{Table: tiers.TableRaw, Series: "ttl", Bucket: tiers.AlignDown(now, tiers.Hour), EventBucket: 1}
	pt := now - tiers.Day
	if err := store.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: 2 * tiers.Day, Rows: []tiers.Row{tiers.PointRow(pt, 1)}}}); err != nil {
		t.Fatal(err)
	}
	var ttl int
	err := s.Query("SELECT ttl(v) FROM "+ks+".points_raw WHERE series = ? AND bucket = ? AND eb = ? AND t = ?",
		key.Series, key.Bucket, int16(key.EventBucket), pt).ScanContext(ctx, &ttl)
	if err != nil {
		t.Fatal(err)
	}
	if want := 24 * 3600; ttl > want || ttl < want-60 {
		t.Fatalf("ttl(v) = %d s, want about %d (a day left of two days' retention)", ttl, want)
	}

	// A read whose context ends mid-partition fails with the context's error.
	rows := make([]tiers.Row, 20000)
	for i := range rows {
		rows[i] = tiers.PointRow(key.Bucket+int64(i), float64(i))
	}
	key.EventBucket = 2
	if err := store.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: tiers.Day, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	pages := store.Read(rctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: key.Bucket, To: key.Bucket + tiers.Hour}, PageSize: 100})
	defer pages.Close()
	if _, err := pages.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		_, err := pages.Next()
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: err = %v, want context.Canceled", err)
		}
		break
	}
}

// TestCassandraStoreExactTimes checks that times far from now, before the
// epoch and at the ends of the gateway's range, survive the round trip to
// CQL timestamps to the millisecond, in both orders.
func TestCassandraStoreExactTimes(t *testing.T) {
	store, _, _ := freshStore(t, tiers.DefaultPyramid())
	ctx := testContext(t)
	times := []int64{tiers.MinTime, tiers.MinTime + 1, -tiers.Day - 1, -1001, -1, 0, 1, 999, 1000, 1001, tiers.MaxTime - 1001, tiers.MaxTime - 1}
	var rows []tiers.Row
	for i, ts := range times {
		rows = append(rows, tiers.Row{T: ts, Min: -float64(i), Max: float64(i), Sum: float64(i) / 3, Count: 1<<40 + int64(i)})
	}
	// The day tier keeps rows forever, so none of them is expired.
	key := tiers.PartitionKey{Table: tiers.RollupTable(tiers.Day), Series: "times", Bucket: tiers.MinTime}
	if err := store.Write(ctx, []tiers.PartitionWrite{{Key: key, Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	for _, desc := range []bool{false, true} {
		got, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: tiers.MinTime, To: tiers.MaxTime}, Desc: desc, PageSize: 5}))
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(rows)
		if desc {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("desc %v:\n got %v\nwant %v", desc, got, want)
		}
	}
	// A span's bounds are exact too: [-1, 1000) holds -1, 0, 1 and 999.
	got, _, err := storetest.ReadAll(store.Read(ctx, tiers.ReadRequest{Key: key, Span: tiers.Span{From: -1, To: 1000}, PageSize: 100}))
	if err != nil {
		t.Fatal(err)
	}
	var ts []int64
	for _, r := range got {
		ts = append(ts, r.T)
	}
	if want := []int64{-1, 0, 1, 999}; !slices.Equal(ts, want) {
		t.Fatalf("span [-1, 1000) read %v, want %v", ts, want)
	}

	// The registry keeps the extremes too.
	id := "times.registry"
	if err := store.NoteSeries(ctx, []tiers.SeriesInfo{{ID: id, First: -5, Last: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := store.NoteSeries(ctx, []tiers.SeriesInfo{{ID: id, First: tiers.MinTime, Last: tiers.MaxTime - 1}, {ID: id, First: 0, Last: 0}}); err != nil {
		t.Fatal(err)
	}
	info, err := store.LookupSeries(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.First != tiers.MinTime || info.Last != tiers.MaxTime-1 {
		t.Fatalf("registry kept %d..%d, want %d..%d", info.First, info.Last, tiers.MinTime, tiers.MaxTime-1)
	}
}

// TestCassandraSchemaAddsLabels applies the schema to a keyspace created
// before labels existed — the registry without its labels columns, no
// label tables — holding a series: Open refuses it until the schema is
// applied again, which adds the columns and tables; the series is then
// there, without labels, and takes labels.
func TestCassandraSchemaAddsLabels(t *testing.T) {
	s := newSession(t)
	ks := newKeyspace(t, s)
	cfg := storeConfig(t, s, ks)
	p := tiers.DefaultPyramid()
	ctx := testContext(t)
	for _, stmt := range cassandra.Schema(cfg, p) {
		if strings.Contains(stmt, "label_") || strings.Contains(stmt, "ADD IF NOT EXISTS labels") || strings.HasPrefix(stmt, "CREATE KEYSPACE") {
			continue
		}
		var lines []string
		for line := range strings.Lines(stmt) {
			if !strings.HasPrefix(strings.TrimSpace(line), "labels") {
				lines = append(lines, line)
			}
		}
		if err := s.Query(strings.Join(lines, "")).ExecContext(ctx); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// A series as a gateway of that time noted it: FNV-1a of the id mod 16
	// is its registry shard.
	id, now := "before.labels", storetest.Start().UnixMilli()
	h := fnv.New32a()
	h.Write([]byte(id))
	if err := s.Query("INSERT INTO "+ks+".series (shard, id, first, last) VALUES (?, ?, ?, ?)", int(h.Sum32()%16), id, now, now).ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	if store, err := cassandra.Open(ctx, cfg, p, storeLogger()); err == nil {
		store.Close()
		t.Fatal("Open of a keyspace without the label index succeeded")
	} else if !strings.Contains(err.Error(), "label_postings") || !strings.Contains(err.Error(), "gateway schema --apply") {
		t.Fatalf("Open: %v, want it to name the missing tables and the command that adds them", err)
	}

	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatal(err)
	}
	store, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	info, err := store.LookupSeries(ctx, id)
	if err != nil || info.First != now || info.Labels != nil {
		t.Fatalf("LookupSeries after the schema was applied: %+v, %v", info, err)
	}
	labels := tiers.Labels{"__name__": "cpu", "host": "a"}
	if err := store.SetLabels(ctx, id, labels); err != nil {
		t.Fatal(err)
	}
	listed, err := store.ListSeries(ctx, "", "", 10)
	if err != nil || len(listed) != 1 || listed[0].ID != id || !listed[0].Labels.Equal(labels) {
		t.Fatalf("ListSeries: %+v, %v", listed, err)
	}
	if got, err := store.Postings(ctx, "host", "a"); err != nil || !slices.Equal(got, []string{id}) {
		t.Fatalf("Postings: %v, %v", got, err)
	}
}
