package cassandra

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/tiers"
)

// tableStatement returns the CREATE TABLE statement of table.
func tableStatement(t *testing.T, stmts []string, ks, table string) string {
	t.Helper()
	head := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (", ks, table)
	var found []string
	for _, s := range stmts {
		// Comment lines may precede the statement.
		for strings.HasPrefix(s, "--") {
			_, s, _ = strings.Cut(s, "\n")
		}
		if strings.HasPrefix(s, head) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d statements create %s.%s", len(found), ks, table)
	}
	return found[0]
}

func TestSchemaOfTheDefaultPyramid(t *testing.T) {
	cfg := DefaultConfig()
	stmts := Schema(cfg, tiers.DefaultPyramid())
	if len(stmts) != 29 {
		t.Fatalf("%d statements, want a keyspace, 20 tables, the late index's version and rewritten columns, the registry's generation, labels and pending labels, and the rollup tables' extras:\n%s", len(stmts), strings.Join(stmts, "\n\n"))
	}
	for _, col := range []string{"late_buckets ADD IF NOT EXISTS version bigint", "late_buckets ADD IF NOT EXISTS rewritten bigint", "series ADD IF NOT EXISTS generation bigint",
		"series ADD IF NOT EXISTS labels frozen<map<text, text>>", "series ADD IF NOT EXISTS labels_pending blob",
		"rollup_1m ADD IF NOT EXISTS extras blob", "rollup_1h ADD IF NOT EXISTS extras blob", "rollup_1d ADD IF NOT EXISTS extras blob"} {
		if want := "ALTER TABLE tsgate." + col; !slices.Contains(stmts, want) {
			t.Errorf("no statement adds a column to a table created without it (%q)", want)
		}
	}
	for _, s := range stmts {
		if strings.HasSuffix(strings.TrimSpace(s), ";") {
			t.Errorf("statement ends with a semicolon:\n%s", s)
		}
		if !strings.Contains(s, "IF NOT EXISTS") {
			t.Errorf("statement is not idempotent:\n%s", s)
		}
	}
	if want := "CREATE KEYSPACE IF NOT EXISTS tsgate\n  WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': '1'}"; stmts[0] != want {
		t.Fatalf("keyspace statement\n%s\nwant\n%s", stmts[0], want)
	}

	const h, d = 3600, 86400
	tierTables := []struct {
		table, key, cols     string
		unit                 string
		window, ttl, gcGrace int64
	}{
		{"points_raw", "PRIMARY KEY ((series, bucket, eb), t)", "eb smallint,|v double,", "HOURS", 1, 7 * d, 4 * h},
		{"points_late", "PRIMARY KEY ((series, bucket), t)", "v double,", "DAYS", 1, 7 * d, 4 * h},
		{"rollup_1m", "PRIMARY KEY ((series, bucket), t)", "min double,|max double,|sum double,|count bigint,|extras blob,", "DAYS", 1, 30 * d, d},
		{"rollup_1h", "PRIMARY KEY ((series, bucket), t)", "min double,|count bigint,|extras blob,", "DAYS", 30, 365 * d, 7 * d},
		{"rollup_1d", "PRIMARY KEY ((series, bucket), t)", "min double,|count bigint,|extras blob,", "DAYS", 365, 0, 7 * d},
	}
	// The sealed chunks are partitioned, compacted and expired like the
	// raw points they hold.
	chunks := tableStatement(t, stmts, "tsgate", "points_raw_chunks")
	for _, w := range []string{"PRIMARY KEY ((series, bucket, eb), first)", "first timestamp,", "last timestamp,", "retention bigint,", "data blob,",
		"WITH CLUSTERING ORDER BY (first ASC)", "'compaction_window_unit': 'HOURS', 'compaction_window_size': '1'", "default_time_to_live = 604800\n", "gc_grace_seconds = 14400"} {
		if !strings.Contains(chunks, w) {
			t.Errorf("points_raw_chunks lacks %q:\n%s", w, chunks)
		}
	}
	// So are the rollup tables' chunks like their rows.
	for _, tt := range []struct {
		table        string
		ttl, gcGrace int64
		unit, size   string
	}{{"rollup_1m_chunks", 30 * d, d, "DAYS", "1"}, {"rollup_1h_chunks", 365 * d, 7 * d, "DAYS", "30"}, {"rollup_1d_chunks", 0, 7 * d, "DAYS", "365"}} {
		chunks := tableStatement(t, stmts, "tsgate", tt.table)
		for _, w := range []string{"PRIMARY KEY ((series, bucket), first)", "data blob,", "WITH CLUSTERING ORDER BY (first ASC)",
			fmt.Sprintf("'compaction_window_unit': '%s', 'compaction_window_size': '%s'", tt.unit, tt.size),
			fmt.Sprintf("default_time_to_live = %d\n", tt.ttl), fmt.Sprintf("gc_grace_seconds = %d", tt.gcGrace)} {
			if !strings.Contains(chunks, w) {
				t.Errorf("%s lacks %q:\n%s", tt.table, w, chunks)
			}
		}
		if strings.Contains(chunks, "eb smallint") {
			t.Errorf("%s has event buckets:\n%s", tt.table, chunks)
		}
	}
	for _, tt := range tierTables {
		s := tableStatement(t, stmts, "tsgate", tt.table)
		wants := []string{
			tt.key, "series text,", "bucket timestamp,", "t timestamp,", "WITH CLUSTERING ORDER BY (t ASC)",
			fmt.Sprintf("compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': '%s', 'compaction_window_size': '%d'}", tt.unit, tt.window),
			fmt.Sprintf("default_time_to_live = %d\n", tt.ttl),
			fmt.Sprintf("gc_grace_seconds = %d", tt.gcGrace),
		}
		wants = append(wants, strings.Split(tt.cols, "|")...)
		for _, w := range wants {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q:\n%s", tt.table, w, s)
			}
		}
		if tt.table != "points_raw" && strings.Contains(s, " eb ") {
			t.Errorf("%s has an event bucket column:\n%s", tt.table, s)
		}
	}

	others := map[string][]string{
		"late_buckets":   {"PRIMARY KEY ((series), bucket)", "bucket timestamp", "version bigint", "gc_grace_seconds = 14400"},
		"series":         {"PRIMARY KEY ((shard), id)", "shard int", "id text", "first timestamp", "last timestamp", "CLUSTERING ORDER BY (id ASC)", "labels frozen<map<text, text>>", "labels_pending blob"},
		"label_postings": {"PRIMARY KEY ((name, value, shard), series)", "CLUSTERING ORDER BY (series ASC)", "LeveledCompactionStrategy", "gc_grace_seconds = 86400"},
		"label_values":   {"PRIMARY KEY ((name, shard), value)", "CLUSTERING ORDER BY (value ASC)", "LeveledCompactionStrategy", "gc_grace_seconds = 86400"},
		"label_names":    {"PRIMARY KEY ((shard), name)", "CLUSTERING ORDER BY (name ASC)", "LeveledCompactionStrategy", "gc_grace_seconds = 86400"},
		"series_layout":  {"PRIMARY KEY ((series), since)", "width bigint", "event_buckets int"},
		"rollup_dirty":   {"PRIMARY KEY ((slot, shard), series, window)", "slot timestamp", "window timestamp", "TimeWindowCompactionStrategy"},
		"rollup_state":   {"name text PRIMARY KEY", "value bigint"},
		"gateway_meta":   {"name text PRIMARY KEY", "value blob"},
		"blocked_series": {"PRIMARY KEY ((shard), series)", "reason text", "since timestamp", "CLUSTERING ORDER BY (series ASC)"},
		"sealed_rows_due": {"PRIMARY KEY ((day, shard), due, tbl, series, bucket)", "written list<bigint>", "CLUSTERING ORDER BY (due ASC, tbl ASC, series ASC, bucket ASC)",
			"gc_grace_seconds = 3600"},
	}
	for table, wants := range others {
		s := tableStatement(t, stmts, "tsgate", table)
		for _, w := range wants {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q:\n%s", table, w, s)
			}
		}
	}
}

// The registry and every table of the label index say how they are split
// and how large a partition grows, in comment lines before the statement
// that gateway schema prints and ApplySchema sends as they are.
func TestSchemaCommentsSayHowTablesAreSplit(t *testing.T) {
	stmts := Schema(DefaultConfig(), tiers.DefaultPyramid())
	for table, wants := range map[string][]string{
		"series":         {"16 partitions", "62,500 rows"},
		"label_postings": {"registry shard", "62,500", "16 shards, not 32"},
		"label_values":   {"FNV-1a of the value mod 16", "62,500 rows"},
		"label_names":    {"mod 4"},
		// 1,440 rows of 54 B, or 2,102 B with every sketch at its bound.
		"rollup_1m": {"1,440 per", "at most 2,048 B", "77.8 kB", "3.0 MB"},
		"rollup_1h": {"720 per", "38.9 kB", "1.5 MB"},
		"rollup_1d": {"365 per", "19.7 kB", "767.2 kB"},
	} {
		head := "CREATE TABLE IF NOT EXISTS tsgate." + table + " ("
		var found string
		for _, s := range stmts {
			if strings.Contains(s, head) {
				found = s
			}
		}
		comment, _, ok := strings.Cut(found, head)
		if !ok || comment == "" {
			t.Fatalf("%s has no comment before it:\n%s", table, found)
		}
		for line := range strings.Lines(comment) {
			if !strings.HasPrefix(line, "-- ") || len(line) > 77 {
				t.Errorf("%s: comment line %q is not a CQL comment of at most 76 characters", table, line)
			}
		}
		for _, w := range wants {
			if !strings.Contains(comment, w) {
				t.Errorf("%s: the comment lacks %q:\n%s", table, w, comment)
			}
		}
		if got := statementHead(found); got != head {
			t.Errorf("statementHead = %q, want %q", got, head)
		}
	}
}

func TestSchemaFollowsTheConfiguration(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Keyspace, cfg.Replication = "metrics", "simple:3"
	p := tiers.DefaultPyramid()
	p[0].BucketWidth = 15 * tiers.Minute
	p[0].Retention = 2 * tiers.Day
	p[1].BucketWidth = 6 * tiers.Hour
	stmts := Schema(cfg, p)
	if want := "{'class': 'SimpleStrategy', 'replication_factor': '3'}"; !strings.Contains(stmts[0], want) {
		t.Fatalf("keyspace statement lacks %s:\n%s", want, stmts[0])
	}
	re := regexp.MustCompile(`(?s)compaction_window_unit': '(\w+)', 'compaction_window_size': '(\d+)'.*default_time_to_live = (\d+).*gc_grace_seconds = (\d+)`)
	for table, want := range map[string]string{
		"points_raw":  "MINUTES 15 172800 14400",
		"points_late": "DAYS 1 172800 14400",
		"rollup_1m":   "HOURS 6 2592000 14400",
	} {
		m := re.FindStringSubmatch(tableStatement(t, stmts, "metrics", table))
		if m == nil {
			t.Fatalf("%s: no table options found", table)
		}
		if got := strings.Join(m[1:], " "); got != want {
			t.Errorf("%s: window, TTL and gc_grace = %s, want %s", table, got, want)
		}
	}
	for _, s := range stmts {
		if strings.Contains(s, "tsgate") {
			t.Fatalf("statement ignores the keyspace:\n%s", s)
		}
	}
}

func TestTWCSWindow(t *testing.T) {
	cases := []struct {
		width int64
		want  string
	}{
		{tiers.Second, "MINUTES 1"},
		{90 * tiers.Second, "MINUTES 2"},
		{15 * tiers.Minute, "MINUTES 15"},
		{90 * tiers.Minute, "MINUTES 90"},
		{tiers.Hour, "HOURS 1"},
		{36 * tiers.Hour, "HOURS 36"},
		{tiers.Day, "DAYS 1"},
		{tiers.Week, "DAYS 7"},
		{365 * tiers.Day, "DAYS 365"},
	}
	for _, c := range cases {
		unit, size := twcsWindow(c.width)
		if got := fmt.Sprintf("%s %d", unit, size); got != c.want {
			t.Errorf("twcsWindow(%s) = %s, want %s", tiers.FormatDuration(c.width), got, c.want)
		}
	}
}

func TestGCGrace(t *testing.T) {
	const h, d = 3600, 86400
	cases := []struct {
		width int64
		want  int64
	}{
		{15 * tiers.Minute, 4 * h},
		{tiers.Hour, 4 * h},
		{12 * tiers.Hour, 4 * h},
		{tiers.Day, d},
		{3 * tiers.Day, d},
		{tiers.Week, 3 * d},
		{27 * tiers.Day, 3 * d},
		{30 * tiers.Day, 7 * d},
		{365 * tiers.Day, 7 * d},
	}
	for _, c := range cases {
		if got := gcGraceSeconds(c.width); got != c.want {
			t.Errorf("gcGraceSeconds(%s) = %d, want %d", tiers.FormatDuration(c.width), got, c.want)
		}
	}
}

func TestRetentionsBeyondTheTTLLimitAreRefused(t *testing.T) {
	p := tiers.DefaultPyramid()
	if err := checkPyramid(p); err != nil {
		t.Fatal(err)
	}
	p[3].Retention = 21 * 365 * tiers.Day
	err := checkPyramid(p)
	if err == nil || !strings.Contains(err.Error(), "day retention") || !strings.Contains(err.Error(), "use 0") {
		t.Fatalf("err = %v", err)
	}
	if got := retentionTTL(1); got != 1 {
		t.Fatalf("retentionTTL(1ms) = %d, want 1 (rounded up)", got)
	}
}
