package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/tsgate/tsgate/tiers"
)

// Store is the Cassandra implementation of tiers.Store. It is safe for
// concurrent use.
type Store struct {
	cfg     Config
	session *gocql.Session
	log     *slog.Logger
	tables  map[tiers.Table]*tableStmts
	stmts   stmts
	serial  gocql.Consistency // the read level of the secrets
	now     func() time.Time
	// oldestNoted is the smallest slot this process has recorded as the
	// oldest dirty slot; MarkDirty skips the write for later slots, which
	// could not lower the stored minimum anyway.
	oldestNoted atomic.Int64
}

var _ tiers.Store = (*Store)(nil)

// kind is the shape of a data table's rows.
type kind int

const (
	kindRaw    kind = iota // (series, bucket, eb), t → v
	kindLate               // (series, bucket), t → v
	kindRollup             // (series, bucket), t → min, max, sum, count
)

// tableStmts are the statements of one data table. The driver prepares
// each on first use and keeps it in its cache.
type tableStmts struct {
	kind    kind
	insert  string
	selAsc  string
	selDesc string
}

// stmts are the statements of the other tables.
type stmts struct {
	noteFirst, noteLast, lookup, layout, appendLayout string
	markLate, lateBuckets                             string
	markDirty, dirtyWindows                           string
	setState, getState                                string
	getMeta, putMeta                                  string
	block, unblock, listBlocked, isBlocked            string
}

func newTableStmts(ks string, name tiers.Table, k kind) *tableStmts {
	t := &tableStmts{kind: k}
	var cols, vals, where string
	switch k {
	case kindRaw:
		cols, vals, where = "series, bucket, eb, t, v", "?, ?, ?, ?, ?", "series = ? AND bucket = ? AND eb = ?"
	case kindLate:
		cols, vals, where = "series, bucket, t, v", "?, ?, ?, ?", "series = ? AND bucket = ?"
	case kindRollup:
		cols, vals, where = "series, bucket, t, min, max, sum, count", "?, ?, ?, ?, ?, ?, ?", "series = ? AND bucket = ?"
	}
	sel := "t, v"
	if k == kindRollup {
		sel = "t, min, max, sum, count"
	}
	t.insert = fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES (%s) USING TTL ?", ks, name, cols, vals)
	// One partition per query, never IN over partitions: every partition is
	// then routed to its own replicas and paged on its own.
	sel = fmt.Sprintf("SELECT %s FROM %s.%s WHERE %s AND t >= ? AND t < ? ORDER BY t ", sel, ks, name, where)
	t.selAsc, t.selDesc = sel+"ASC", sel+"DESC"
	return t
}

func newStmts(ks string) stmts {
	q := func(format string, table string) string { return fmt.Sprintf(format, ks+"."+table) }
	return stmts{
		noteFirst:    q("UPDATE %s USING TIMESTAMP ? SET first = ? WHERE shard = ? AND id = ?", tableSeries),
		noteLast:     q("UPDATE %s USING TIMESTAMP ? SET last = ? WHERE shard = ? AND id = ?", tableSeries),
		lookup:       q("SELECT first, last FROM %s WHERE shard = ? AND id = ?", tableSeries),
		layout:       q("SELECT since, width, event_buckets FROM %s WHERE series = ?", tableSeriesLayout),
		appendLayout: q("INSERT INTO %s (series, since, width, event_buckets) VALUES (?, ?, ?, ?)", tableSeriesLayout),
		markLate:     q("INSERT INTO %s (series, bucket, version) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?", tableLateBuckets),
		lateBuckets:  q("SELECT bucket, version FROM %s WHERE series = ? AND bucket >= ? AND bucket < ?", tableLateBuckets),
		markDirty:    q("INSERT INTO %s (slot, shard, series, window) VALUES (?, ?, ?, ?) USING TTL ?", tableRollupDirty),
		dirtyWindows: q("SELECT series, window FROM %s WHERE slot = ? AND shard = ?", tableRollupDirty),
		setState:     q("UPDATE %s USING TIMESTAMP ? SET value = ? WHERE name = ?", tableRollupState),
		getState:     q("SELECT value FROM %s WHERE name = ?", tableRollupState),
		getMeta:      q("SELECT value FROM %s WHERE name = ?", tableMeta),
		putMeta:      q("INSERT INTO %s (name, value) VALUES (?, ?) IF NOT EXISTS", tableMeta),
		block:        q("INSERT INTO %s (shard, series, reason, since) VALUES (0, ?, ?, ?)", tableBlocked),
		unblock:      q("DELETE FROM %s WHERE shard = 0 AND series = ?", tableBlocked),
		listBlocked:  q("SELECT series, reason, since FROM %s WHERE shard = 0", tableBlocked),
		isBlocked:    q("SELECT reason, since FROM %s WHERE shard = 0 AND series = ?", tableBlocked),
	}
}

// Open connects to the cluster and checks that the keyspace holds the
// tables of p. It creates nothing: `gateway schema --apply` does. ctx bounds
// the schema check; connecting is bounded by ConnectTimeout, as the driver
// takes no context there.
func Open(ctx context.Context, cfg Config, p tiers.Pyramid, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkPyramid(p); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	session, err := newSession(cfg, log)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg: cfg, session: session, log: log,
		tables: map[tiers.Table]*tableStmts{},
		stmts:  newStmts(cfg.Keyspace),
		now:    cfg.Now,
	}
	if s.now == nil {
		s.now = time.Now
	}
	cons, _ := parseConsistency(cfg.Consistency) // validated above
	s.serial = serialFor(cons)
	s.oldestNoted.Store(maxInt64)
	for _, t := range p.Tables() {
		k := kindRollup
		switch t {
		case tiers.TableRaw:
			k = kindRaw
		case tiers.TableLate:
			k = kindLate
		}
		s.tables[t] = newTableStmts(cfg.Keyspace, t, k)
	}
	if err := s.checkSchema(ctx, p); err != nil {
		session.Close()
		return nil, err
	}
	return s, nil
}

// checkSchema fails when the keyspace or a table is missing, and warns when
// a tier table's default TTL no longer matches the configured retention
// (the tables are created once; later retention changes need ALTER TABLE).
func (s *Store) checkSchema(ctx context.Context, p tiers.Pyramid) error {
	ks := s.cfg.Keyspace
	hint := fmt.Sprintf("run `gateway schema --apply --keyspace %s` with the same --cassandra-* flags first", ks)
	var name string
	err := s.session.Query("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).ScanContext(ctx, &name)
	if errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("cassandra: keyspace %s does not exist: %s", ks, hint)
	}
	if err != nil {
		return fmt.Errorf("cassandra: read the schema of keyspace %s: %w", ks, err)
	}
	ttls := map[string]int64{}
	iter := s.session.Query("SELECT table_name, default_time_to_live FROM system_schema.tables WHERE keyspace_name = ?", ks).IterContext(ctx)
	var table string
	var ttl int
	for iter.Scan(&table, &ttl) {
		ttls[table] = int64(ttl)
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("cassandra: read the tables of keyspace %s: %w", ks, err)
	}
	var missing []string
	for t := range s.tables {
		if _, ok := ttls[string(t)]; !ok {
			missing = append(missing, string(t))
		}
	}
	for _, t := range []string{tableLateBuckets, tableSeries, tableSeriesLayout, tableRollupDirty, tableRollupState, tableMeta, tableBlocked} {
		if _, ok := ttls[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("cassandra: keyspace %s lacks the tables %s: %s", ks, strings.Join(missing, ", "), hint)
	}
	var col string
	err = s.session.Query("SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ? AND column_name = ?",
		ks, tableLateBuckets, "version").ScanContext(ctx, &col)
	if errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("cassandra: table %s.%s lacks the column version: %s", ks, tableLateBuckets, hint)
	}
	if err != nil {
		return fmt.Errorf("cassandra: read the columns of %s.%s: %w", ks, tableLateBuckets, err)
	}
	want := map[tiers.Table]int64{tiers.TableLate: retentionTTL(p.Raw().Retention)}
	for _, l := range p.Levels() {
		want[p.Tier(l).Table] = retentionTTL(p.Tier(l).Retention)
	}
	for table, w := range want {
		if got := ttls[string(table)]; got != w {
			s.log.Warn("cassandra: a table's default TTL differs from the configured retention; rows still expire by the configured retention, which they carry",
				"table", table, "default_time_to_live", got, "retention_seconds", w)
		}
	}
	return nil
}

// Ping runs the cheapest query there is.
func (s *Store) Ping(ctx context.Context) error {
	var v string
	if err := s.session.Query("SELECT release_version FROM system.local").ScanContext(ctx, &v); err != nil {
		return fmt.Errorf("cassandra: ping: %w", err)
	}
	return nil
}

// Close closes the session. Every write has been acknowledged by the time
// it returned, so there is nothing to flush.
func (s *Store) Close() error {
	s.session.Close()
	return nil
}
