//go:build integration

package integration

import (
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// A keyspace created before rollup rows kept extras lacks the extras
// column: the gateway refuses to open it, naming the column and saying to
// apply the schema; applying it adds the column, rows written before read
// as rows whose extras know nothing, and rows written since keep theirs.
func TestCassandraSchemaAddsRollupExtras(t *testing.T) {
	s := newSession(t)
	ks := newKeyspace(t, s)
	cfg := storeConfig(t, s, ks)
	p := tiers.DefaultPyramid()
	ctx := testContext(t)
	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"rollup_1m", "rollup_1h", "rollup_1d"} {
		if err := s.Query("ALTER TABLE " + ks + "." + table + " DROP extras").ExecContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	base := tiers.AlignDown(storetest.Start().UnixMilli(), tiers.Day)
	if err := s.Query("INSERT INTO "+ks+".rollup_1m (series, bucket, t, min, max, sum, count) VALUES (?, ?, ?, ?, ?, ?, ?)",
		"old", base, base, 1.0, 3.0, 4.0, int64(2)).ExecContext(ctx); err != nil {
		t.Fatal(err)
	}
	if store, err := cassandra.Open(ctx, cfg, p, storeLogger()); err == nil {
		store.Close()
		t.Fatal("Open succeeded on rollup tables without the extras column")
	} else if !strings.Contains(err.Error(), "extras") || !strings.Contains(err.Error(), "gateway schema --apply") {
		t.Fatalf("Open: %v", err)
	}
	if err := cassandra.ApplySchema(ctx, cfg, p); err != nil {
		t.Fatalf("apply over the old rollup tables: %v", err)
	}
	store, err := cassandra.Open(ctx, cfg, p, storeLogger())
	if err != nil {
		t.Fatalf("open after applying the schema: %v", err)
	}
	defer store.Close()
	key := tiers.PartitionKey{Table: "rollup_1m", Series: "old", Bucket: base}
	req := tiers.ReadRequest{Key: key, Span: tiers.Span{From: base, To: base + tiers.Day}, PageSize: 10, Extras: true}
	rows, _, err := storetest.ReadAll(store.Read(ctx, req))
	if err != nil || len(rows) != 1 || rows[0].Sum != 4 || rows[0].X == nil || rows[0].X.HasSketch() || rows[0].X.HasCounter {
		t.Fatalf("the row written before extras: %+v, %v", rows, err)
	}
	var fresh tiers.Row
	fresh.T = base
	fresh.AddExtras(tiers.PointRow(base+1000, 1))
	fresh.AddExtras(tiers.PointRow(base+11000, 3))
	if err := store.Write(ctx, []tiers.PartitionWrite{{Key: key, Retention: 30 * tiers.Day, Rows: []tiers.Row{fresh}}}); err != nil {
		t.Fatal(err)
	}
	rows, _, err = storetest.ReadAll(store.Read(ctx, req))
	if err != nil || len(rows) != 1 || !rows[0].X.HasCounter || rows[0].X.Counter.Inc != 2 || !rows[0].X.HasSketch() {
		t.Fatalf("the row rolled up again: %+v, %v", rows, err)
	}
}
