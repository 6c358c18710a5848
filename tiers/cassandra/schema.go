package cassandra

import (
	"context"
	"fmt"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/tiers"
)

// Tables that are not tiers.
const (
	tableLateBuckets  = "late_buckets"
	tableSeries       = "series"
	tableSeriesLayout = "series_layout"
	tableRollupDirty  = "rollup_dirty"
	tableRollupState  = "rollup_state"
	tableMeta         = "gateway_meta"
	tableBlocked      = "blocked_series"
)

// maxTTLSeconds is Cassandra's largest TTL, 20 years.
const maxTTLSeconds = 20 * 365 * 24 * 3600

// Schema returns the CQL that creates the keyspace and every table for the
// pyramid p, without trailing semicolons. Every statement is IF NOT EXISTS,
// so running them again changes nothing; in particular, they do not alter
// the options of tables that already exist.
func Schema(cfg Config, p tiers.Pyramid) []string {
	ks := cfg.Keyspace
	repl, err := replicationMap(cfg.Replication)
	if err != nil {
		repl = [][2]string{{"class", "NetworkTopologyStrategy"}} // Validate reports it
	}
	var entries []string
	for _, kv := range repl {
		entries = append(entries, fmt.Sprintf("'%s': '%s'", kv[0], kv[1]))
	}
	stmts := []string{fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s\n  WITH replication = {%s}", ks, strings.Join(entries, ", "))}

	raw := p.Raw()
	for _, l := range p.Levels() {
		t := p.Tier(l)
		var cols, key string
		switch l {
		case tiers.LevelRaw:
			cols, key = "    v double,\n", "(series, bucket, eb), t"
		default:
			cols, key = "    min double,\n    max double,\n    sum double,\n    count bigint,\n    extras blob,\n", "(series, bucket), t"
		}
		eb := ""
		if l == tiers.LevelRaw {
			eb = "    eb smallint,\n"
		}
		head := ""
		if l != tiers.LevelRaw {
			head = comment(rollupComment(t))
		}
		stmts = append(stmts, head+fmt.Sprintf(
			"CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    bucket timestamp,\n%s    t timestamp,\n%s    PRIMARY KEY (%s)\n) WITH CLUSTERING ORDER BY (t ASC)\n  AND %s",
			ks, t.Table, eb, cols, key, tierOptions(t.BucketWidth, t.BucketWidth, t.Retention)))
		if l != tiers.LevelRaw {
			// Keyspaces created before rollup rows kept extras (the
			// quantile sketch and counter summary) gain the column; rows
			// written before have none until their window is rolled up
			// again.
			stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS extras blob", ks, t.Table))
			// Sealed rollup partitions: their rows as compressed chunks.
			stmts = append(stmts, chunkSchema(ks, *t))
		}
		if l == tiers.LevelRaw {
			// Sealed raw partitions: their points as compressed chunks.
			stmts = append(stmts, chunkSchema(ks, *raw))
			stmts = append(stmts, sealedRowsDueSchema(ks))
			// Late points arrive out of order by definition; a one-day
			// window keeps them from being spread over the raw tier's many
			// small windows. Partitions are the raw tier's buckets, so they
			// share its gc_grace.
			stmts = append(stmts, fmt.Sprintf(
				"CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    bucket timestamp,\n    t timestamp,\n    v double,\n    PRIMARY KEY ((series, bucket), t)\n) WITH CLUSTERING ORDER BY (t ASC)\n  AND %s",
				ks, tiers.TableLate, tierOptions(tiers.Day, raw.BucketWidth, raw.Retention)))
		}
	}
	stmts = append(stmts,
		// One row per raw bucket holding late points or rewritten after the
		// fact; each cell has its own TTL (the bucket's end of retention).
		// version is that of its last late mark, which keys cached reads of
		// the bucket's late partition; rewritten that of its last rewrite
		// mark (an import into its raw partitions), which keys cached
		// reads of the whole bucket.
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    bucket timestamp,\n    version bigint,\n    rewritten bigint,\n    PRIMARY KEY ((series), bucket)\n) WITH CLUSTERING ORDER BY (bucket ASC)\n  AND gc_grace_seconds = %d",
			ks, tableLateBuckets, gcGraceSeconds(raw.BucketWidth)),
		// Keyspaces created before marks had versions, or rewrite marks,
		// gain the columns.
		fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS version bigint", ks, tableLateBuckets),
		fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS rewritten bigint", ks, tableLateBuckets),
		// The registry: ids spread over a fixed number of shards so that a
		// listing is a merge of a few clustering-ordered partitions. The
		// cells are overwritten on every ingest batch, hence leveled
		// compaction, which bounds the SSTables a lookup reads.
		// generation is the version of the series' last rewrite mark.
		// labels are the series' labels (tiers.LabelIndex), one frozen
		// cell that SetLabels replaces whole; labels_pending the pairs a
		// SetLabels call lost whose postings and entries it has not
		// removed yet.
		comment(registryComment)+fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    shard int,\n    id text,\n    first timestamp,\n    last timestamp,\n    generation bigint,\n    labels frozen<map<text, text>>,\n    labels_pending blob,\n    PRIMARY KEY ((shard), id)\n) WITH CLUSTERING ORDER BY (id ASC)\n  AND compaction = {'class': 'LeveledCompactionStrategy'}",
			ks, tableSeries),
		fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS generation bigint", ks, tableSeries),
		// Keyspaces created before labels gain them.
		fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS labels frozen<map<text, text>>", ks, tableSeries),
		fmt.Sprintf("ALTER TABLE %s.%s ADD IF NOT EXISTS labels_pending blob", ks, tableSeries),
		// The label index: read far more often than written (every
		// selector reads postings), hence leveled compaction. Entries are
		// deleted only when a series' labels change; see indexOptions for
		// gc_grace.
		comment(postingsComment)+fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    name text,\n    value text,\n    shard int,\n    series text,\n    PRIMARY KEY ((name, value, shard), series)\n) WITH CLUSTERING ORDER BY (series ASC)\n  AND %s",
			ks, tableLabelPostings, indexOptions),
		comment(valuesComment)+fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    name text,\n    shard int,\n    value text,\n    PRIMARY KEY ((name, shard), value)\n) WITH CLUSTERING ORDER BY (value ASC)\n  AND %s",
			ks, tableLabelValues, indexOptions),
		comment(namesComment)+fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    shard int,\n    name text,\n    PRIMARY KEY ((shard), name)\n) WITH CLUSTERING ORDER BY (name ASC)\n  AND %s",
			ks, tableLabelNames, indexOptions),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    series text,\n    since timestamp,\n    width bigint,\n    event_buckets int,\n    PRIMARY KEY ((series), since)\n) WITH CLUSTERING ORDER BY (since ASC)",
			ks, tableSeriesLayout),
		// The rollup log is written in write-time order and expires by TTL,
		// which is what time-window compaction is for.
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    slot timestamp,\n    shard int,\n    series text,\n    window timestamp,\n    PRIMARY KEY ((slot, shard), series, window)\n) WITH compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'HOURS', 'compaction_window_size': '1'}\n  AND gc_grace_seconds = %d",
			ks, tableRollupDirty, gcGraceSeconds(tiers.Hour)),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    name text PRIMARY KEY,\n    value bigint\n)", ks, tableRollupState),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    name text PRIMARY KEY,\n    value blob\n)", ks, tableMeta),
		// An operator's short list, read whole by every instance once per
		// series-cache TTL: one partition (shard is always 0), in id order.
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (\n    shard int,\n    series text,\n    reason text,\n    since timestamp,\n    PRIMARY KEY ((shard), series)\n) WITH CLUSTERING ORDER BY (series ASC)",
			ks, tableBlocked),
	)
	return stmts
}

// indexOptions are the options of the label index tables. A delete there
// only ever removes a posting or entry that a change of labels made
// stale; one that a replica missed and that comes back after gc_grace is
// a posting whose series no longer has the pair, which readers re-check
// against the series' labels, or a value or name no series has, which
// lists harmlessly. So tombstones need not outlive the hint window by
// much: one day, and selectors scan fewer of them.
const indexOptions = "compaction = {'class': 'LeveledCompactionStrategy'}\n  AND gc_grace_seconds = 86400"

// The partition sizes the comments of the registry and the label index
// state: for sizedSeries series of sizedLabels labels each, the example
// spread of their values, and about indexRowBytes bytes per index row
// (a series id or value of 20–40 bytes and the row's overhead) and
// registryRowBytes per registry row with its labels.
const (
	sizedSeries      = 1_000_000
	sizedLabels      = 5
	indexRowBytes    = 50
	registryRowBytes = 200
)

var (
	registryComment = fmt.Sprintf(`The registry: one row per series, split into %d partitions (shard) by
FNV-1a of the id mod %d. %s series of %d labels: %s rows of about
%d bytes (id, span, labels) per partition, %s.`,
		seriesShards, seriesShards, count(sizedSeries), sizedLabels, count(sizedSeries/seriesShards),
		registryRowBytes, mb(sizedSeries/seriesShards*registryRowBytes))
	postingsComment = fmt.Sprintf(`Postings: the series that have one label pair, one partition per pair
and shard. shard is the series' registry shard (FNV-1a of the id mod %d),
so a pair held by n series has n/%d rows per partition and a read
queries the %d shards at once. %s series of %d labels (__name__ among 10
names, host among 10,000, dc among 5, job among 20, instance unique):
%s rows, at most %s per partition (a dc value: 200,000 series),
%s for a pair every series has (about %s), 6 for a host.
%d shards, not 32: no partition grows past the registry's own (the
same %s rows at %s series), and every selector pays one query
per shard.`,
		seriesShards, seriesShards, seriesShards, count(sizedSeries), sizedLabels,
		count(sizedSeries*sizedLabels), count(200_000/seriesShards), count(sizedSeries/seriesShards),
		mb(sizedSeries/seriesShards*indexRowBytes), seriesShards, count(sizedSeries/seriesShards), count(sizedSeries))
	valuesComment = fmt.Sprintf(`The values each label name has, split into %d partitions per name
(shard) by FNV-1a of the value mod %d. %s series of %d labels as
above: at most %s rows per partition (instance, one value per
series, about %s), about %d for host, 1 for dc.`,
		valueShards, valueShards, count(sizedSeries), sizedLabels, count(sizedSeries/valueShards),
		mb(sizedSeries/valueShards*indexRowBytes), 10_000/valueShards)
	namesComment = fmt.Sprintf(`The label names, split into %d partitions (shard) by FNV-1a of the
name mod %d, so that the writes of different names (every SetLabels
rewrites its names) reach different replicas. %s series of %d
labels: %d rows in all.`,
		nameShards, nameShards, count(sizedSeries), sizedLabels, sizedLabels)
)

// rollupRowBytes is about what a rollup row takes without its extras: t,
// min, max, sum and count and the row's overhead (gateway size's default
// row bytes, 30, and the three more values).
const rollupRowBytes = 54

// rollupComment says how large a partition of a rollup tier grows: one row
// per window with points, each row's extras (the window's quantile sketch
// and counter summary) at most tiers.MaxExtrasLen.
func rollupComment(t *tiers.Tier) string {
	rows := int(t.BucketWidth / t.Step)
	return fmt.Sprintf(`The %s tier: one row per %s window with points, at most %s per
partition (a %s bucket). A row keeps min, max, sum, count (about %d B) and
extras, the window's quantile sketch and counter summary: tens to hundreds
of bytes, at most %s B, so a partition holds at most %s without them and
%s with every sketch at its bound.`,
		t.Name, tiers.FormatDuration(t.Step), count(rows), tiers.FormatDuration(t.BucketWidth), rollupRowBytes,
		count(tiers.MaxExtrasLen), kbOrMB(rows*rollupRowBytes), kbOrMB(rows*(rollupRowBytes+tiers.MaxExtrasLen)))
}

// comment turns text into CQL comment lines of at most 76 characters that
// precede a statement; a NUL joins two words on one line.
func comment(text string) string {
	var b strings.Builder
	line := "--"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 76 && line != "--" {
			b.WriteString(line + "\n")
			line = "--"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return strings.ReplaceAll(b.String(), "\x00", " ")
}

// count writes n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// mb writes a byte count in megabytes, one decimal, number and unit joined
// by a NUL that comment turns into a space that never breaks a line.
func mb(n int) string { return fmt.Sprintf("%.1f\x00MB", float64(n)/1e6) }

// kbOrMB is mb, or kilobytes below a megabyte.
func kbOrMB(n int) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f\x00kB", float64(n)/1e3)
	}
	return mb(n)
}

// statementHead is the first line of a statement that is not a comment.
func statementHead(stmt string) string {
	for line := range strings.Lines(stmt) {
		if !strings.HasPrefix(line, "--") {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return stmt
}

// tierOptions are the table options of a tier table: a TWCS window of
// window, gc_grace keyed by the partition's bucket width, and the tier's
// retention as the default TTL.
func tierOptions(window, bucketWidth, retention int64) string {
	unit, size := twcsWindow(window)
	return fmt.Sprintf("compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': '%s', 'compaction_window_size': '%d'}\n"+
		"  AND default_time_to_live = %d\n  AND gc_grace_seconds = %d",
		unit, size, retentionTTL(retention), gcGraceSeconds(bucketWidth))
}

// twcsWindow expresses a bucket width as a TWCS compaction window, in the
// largest unit that divides it, so that each SSTable holds about one bucket
// of each series and drops whole once the bucket expires. Widths that are
// not whole minutes round up to the next minute, TWCS's finest unit.
func twcsWindow(width int64) (unit string, size int64) {
	switch {
	case width >= tiers.Day && width%tiers.Day == 0:
		return "DAYS", width / tiers.Day
	case width >= tiers.Hour && width%tiers.Hour == 0:
		return "HOURS", width / tiers.Hour
	}
	return "MINUTES", max(1, (width+tiers.Minute-1)/tiers.Minute)
}

// gcGraceSeconds follows the seeds' table of gc_grace by bucket size
// (hourly 4 h, daily 1 d, weekly 3 d, monthly and longer 7 d). The data is
// never deleted, only expired by TTL on every replica alike, so there is no
// deletion to resurrect; gc_grace only delays purging expired cells, and a
// short one keeps TWCS dropping whole SSTables soon after they expire, while
// still covering the repair interval that bucket size implies.
func gcGraceSeconds(bucketWidth int64) int64 {
	switch {
	case bucketWidth < tiers.Day:
		return 4 * 3600
	case bucketWidth < tiers.Week:
		return 24 * 3600
	case bucketWidth < 28*tiers.Day:
		return 3 * 24 * 3600
	}
	return 7 * 24 * 3600
}

// retentionTTL is a retention as a default_time_to_live: whole seconds,
// rounded up, 0 for forever, at most Cassandra's limit (checkPyramid refuses
// longer retentions before a store is opened).
func retentionTTL(retention int64) int64 {
	if retention <= 0 {
		return 0
	}
	return min((retention+999)/1000, maxTTLSeconds)
}

// checkPyramid refuses retentions that Cassandra's TTL cannot express.
func checkPyramid(p tiers.Pyramid) error {
	for _, l := range p.Levels() {
		t := p.Tier(l)
		if t.Retention > maxTTLSeconds*1000 {
			return fmt.Errorf("%s retention %s is longer than Cassandra's largest TTL (20 years); use 0 to keep %s rows forever",
				t.Name, tiers.FormatDuration(t.Retention), t.Name)
		}
	}
	return nil
}

// ApplySchema creates the keyspace and the tables that do not exist yet and
// waits until every node agrees on the schema.
func ApplySchema(ctx context.Context, cfg Config, p tiers.Pyramid) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := checkPyramid(p); err != nil {
		return err
	}
	session, err := newSession(cfg, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	for _, stmt := range Schema(cfg, p) {
		if err := session.Query(stmt).ExecContext(ctx); err != nil {
			return fmt.Errorf("cassandra: %s: %w", strings.TrimSuffix(statementHead(stmt), " ("), err)
		}
	}
	if err := session.AwaitSchemaAgreement(ctx); err != nil {
		return fmt.Errorf("cassandra: waiting for schema agreement: %w", err)
	}
	return versionLegacyLateMarks(ctx, session, cfg.Keyspace, p.Raw().Retention)
}

// versionLegacyLateMarks gives late marks written before marks had
// versions version 1, written at the time the scan starts: a mark written
// since (which the scan may not have seen) wins, one written before has a
// version already. Without it such a mark (no version cell) would read, once the
// bucket also has a rewrite mark, as a bucket without a late partition, and
// its late points would be left out. It reads the whole late index, one
// row per marked bucket, so it runs here and not when a gateway starts.
func versionLegacyLateMarks(ctx context.Context, session *gocql.Session, ks string, rawRetention int64) error {
	stamp, now := time.Now().UnixMicro(), time.Now().UnixMilli()
	iter := session.Query(fmt.Sprintf("SELECT series, bucket, version, rewritten FROM %s.%s", ks, tableLateBuckets)).IterContext(ctx)
	update := fmt.Sprintf("UPDATE %s.%s USING TTL ? AND TIMESTAMP ? SET version = 1 WHERE series = ? AND bucket = ?", ks, tableLateBuckets)
	var series string
	var bucket int64
	var v, rw *int64
	for iter.Scan(&series, &bucket, &v, &rw) {
		if v != nil || rw != nil {
			continue
		}
		// The bucket's width is the series' layout's; a month more than the
		// raw retention outlives every late row of the bucket. A mark past
		// that would be gone already, unless it was written without a TTL:
		// then the version has none either.
		ttl, ok := rowTTL(bucket, rawRetention+31*tiers.Day, now)
		if !ok {
			ttl = 0
		}
		if err := session.Query(update, ttl, stamp, series, bucket).ExecContext(ctx); err != nil {
			iter.Close()
			return fmt.Errorf("cassandra: version the late mark of %q at %d: %w", series, bucket, err)
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("cassandra: read the late index: %w", err)
	}
	return nil
}
