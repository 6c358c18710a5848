//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// A keyspace created before late marks had versions (and rewrite marks)
// lacks the columns: the gateway refuses to open it, saying to apply the
// schema, and applying it adds the columns without touching the marks
// already there, which read as version 1 until they are marked again.
func TestCassandraSchemaAddsTheLateMarkVersion(t *testing.T) {
	s := newSession(t)
	ks := newKeyspace(t, s)
	cfg := storeConfig(t, s, ks)
	p := tiers.DefaultPyramid()
	ctx := testContext(t)
	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("ALTER TABLE " + ks + ".late_buckets DROP (version, rewritten)").ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("INSERT INTO "+ks+".late_buckets (series, bucket) VALUES (?, ?)", "old", int64(3600000)).ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	if store, err := cassandra.Open(ctx, cfg, p, storeLogger()); err == nil {
		store.Close()
		t.Fatal("Open succeeded on a late index without the version column")
	} else if !strings.Contains(err.Error(), "version") || !strings.Contains(err.Error(), "gateway schema --apply") {
		t.Fatalf("Open: %v", err)
	}
	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatalf("apply over the old late index: %v", err)
	}
	store, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatalf("open after applying the schema: %v", err)
	}
	defer store.Close()
	got, err := store.LateBuckets(ctx, "old", tiers.Span{From: 0, To: tiers.Day})
	if err != nil || len(got) != 1 || got[0].Bucket != 3600000 || got[0].Version != 1 || got[0].Rewritten != 0 {
		t.Fatalf("the mark written before versions: %+v, %v", got, err)
	}
	// A rewrite mark on the same bucket leaves it marked late: its late
	// points are still read.
	if err := store.MarkLate(ctx, []tiers.LateMark{{Series: "old", Bucket: 3600000, Retention: storetest.Start().UnixMilli() - 3600000 + tiers.Day, Rewrite: true}}); err != nil {
		t.Fatal(err)
	}
	got, err = store.LateBuckets(ctx, "old", tiers.Span{From: 0, To: tiers.Day})
	if err != nil || len(got) != 1 || got[0].Version == 0 || got[0].Rewritten == 0 {
		t.Fatalf("the mark written before versions, then rewritten: %+v, %v", got, err)
	}
}
