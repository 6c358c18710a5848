package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/singleflight"

	"github.com/tsgate/tsgate/tiers"
)

// Store is the Cassandra implementation of tiers.Store. It is safe for
// concurrent use.
type Store struct {
	cfg     Config
	pyramid tiers.Pyramid
	log     *slog.Logger
	// session is nil until a node has answered and the schema checked out;
	// until then every operation fails with ErrNotConnected and the reason.
	session atomic.Pointer[gocql.Session]
	mu      sync.Mutex
	reason  error                            // why session is nil (guarded by mu)
	closing chan struct{}                    // closed by Close: the connector gives up
	done    chan struct{}                    // closed when the connector has returned
	spec    gocql.SpeculativeExecutionPolicy // nil: reads are not speculated
	tables  map[tiers.Table]*tableStmts
	stmts   stmts
	chunks  *chunkStmts
	// sealedRows are the statements of the seals' deferred row deletes.
	sealedRows sealedRowsStmts
	// chunkFlights shares a raw bucket's chunk query among the reads of
	// its event buckets (see rawChunks).
	chunkFlights singleflight.Group
	serial       gocql.Consistency // the read level of the secrets
	now          func() time.Time
	// oldestNoted is the smallest slot this process has recorded as the
	// oldest dirty slot; MarkDirty skips the write for later slots, which
	// could not lower the stored minimum anyway.
	oldestNoted atomic.Int64
	// marksSince is when the first gateway that marks rows written to
	// sealed partitions (see markFirst) opened the keyspace, kept in the
	// meta table: chunks sealed before it may have rows beside them
	// without a mark, which reads then read too.
	marksSince atomic.Int64
	// rowReadsSkipped counts the partition reads that found chunks and no
	// mark, and read no rows.
	rowReadsSkipped atomic.Int64
	// hostsUp is how many nodes the driver holds up, counted at most once
	// a second (at hostsUpAt, Unix nanoseconds): reads speculate only when
	// a second node can take the extra attempt.
	hostsUp, hostsUpAt atomic.Int64
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
	// The reads of rollup rows with their extras.
	selExtrasAsc, selExtrasDesc string
	// chunks are the statements of the table's sealed chunks (raw and
	// rollup tables).
	chunks *chunkStmts
	// seriesPages reads the first page of one bucket's partitions for
	// many series (Store.seriesPages).
	seriesPages string
}

// stmts are the statements of the other tables.
type stmts struct {
	noteFirst, noteLast, lookup, layout, appendLayout string
	lookupOf, layoutOf                                string
	markGeneration                                    string
	markLate, markRewrite, lateBuckets, lateBucketsOf string
	markDirty, dirtyWindows                           string
	setState, getState                                string
	getMeta, putMeta                                  string
	block, unblock, listBlocked, isBlocked            string
	readLabels, seriesLabels                          string
	setLabels, setLabelsPending, clearPending         string
	addPosting, delPosting, postings, anyPosting      string
	addValue, delValue, values, anyValue              string
	addName, names                                    string
	delName                                           string
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
		cols, vals, where = "series, bucket, t, min, max, sum, count, extras", "?, ?, ?, ?, ?, ?, ?, ?", "series = ? AND bucket = ?"
	}
	sel := "t, v"
	if k == kindRollup {
		sel = "t, min, max, sum, count"
	}
	t.insert = fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES (%s) USING TTL ?", ks, name, cols, vals)
	// One partition per query: every partition is then routed to its own
	// replicas and paged on its own. The exceptions are the bounded IN
	// reads of the package doc (seriesPages and the chunk batches).
	selectFrom := func(cols string) string {
		return fmt.Sprintf("SELECT %s FROM %s.%s WHERE %s AND t >= ? AND t < ? ORDER BY t ", cols, ks, name, where)
	}
	sel = selectFrom(sel)
	t.selAsc, t.selDesc = sel+"ASC", sel+"DESC"
	if k == kindRollup {
		// Only reads that ask for extras select them.
		sel = selectFrom("t, min, max, sum, count, extras")
		t.selExtrasAsc, t.selExtrasDesc = sel+"ASC", sel+"DESC"
	}
	if k != kindLate {
		t.chunks = newChunkStmts(ks, name, k)
	}
	if k == kindRollup {
		t.seriesPages = fmt.Sprintf("SELECT series, t, min, max, sum, count FROM %s.%s WHERE series IN ? AND bucket = ? AND t >= ? AND t < ? PER PARTITION LIMIT ?", ks, name)
	}
	if k == kindRaw {
		t.seriesPages = fmt.Sprintf("SELECT series, eb, t, v FROM %s.%s WHERE series IN ? AND bucket = ? AND eb IN ? AND t >= ? AND t < ? PER PARTITION LIMIT ?", ks, name)
	}
	return t
}

func newStmts(ks string) stmts {
	q := func(format string, table string) string { return fmt.Sprintf(format, ks+"."+table) }
	return stmts{
		noteFirst:      q("UPDATE %s USING TIMESTAMP ? SET first = ? WHERE shard = ? AND id = ?", tableSeries),
		noteLast:       q("UPDATE %s USING TIMESTAMP ? SET last = ? WHERE shard = ? AND id = ?", tableSeries),
		lookup:         q("SELECT first, last, generation, labels FROM %s WHERE shard = ? AND id = ?", tableSeries),
		markGeneration: q("UPDATE %s USING TIMESTAMP ? SET generation = ? WHERE shard = ? AND id = ?", tableSeries),
		layout:         q("SELECT since, width, event_buckets FROM %s WHERE series = ?", tableSeriesLayout),
		lookupOf:       q("SELECT id, first, last, generation, labels FROM %s WHERE shard = ? AND id IN ?", tableSeries),
		layoutOf:       q("SELECT series, since, width, event_buckets FROM %s WHERE series IN ?", tableSeriesLayout),
		appendLayout:   q("INSERT INTO %s (series, since, width, event_buckets) VALUES (?, ?, ?, ?)", tableSeriesLayout),
		markLate:       q("INSERT INTO %s (series, bucket, version) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?", tableLateBuckets),
		markRewrite:    q("INSERT INTO %s (series, bucket, rewritten) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?", tableLateBuckets),
		lateBuckets:    q("SELECT bucket, version, rewritten FROM %s WHERE series = ? AND bucket >= ? AND bucket < ?", tableLateBuckets),
		lateBucketsOf:  q("SELECT series, bucket, version, rewritten FROM %s WHERE series IN ? AND bucket >= ? AND bucket < ?", tableLateBuckets),
		markDirty:      q("INSERT INTO %s (slot, shard, series, window) VALUES (?, ?, ?, ?) USING TTL ?", tableRollupDirty),
		dirtyWindows:   q("SELECT series, window FROM %s WHERE slot = ? AND shard = ?", tableRollupDirty),
		setState:       q("UPDATE %s USING TIMESTAMP ? SET value = ? WHERE name = ?", tableRollupState),
		getState:       q("SELECT value FROM %s WHERE name = ?", tableRollupState),
		getMeta:        q("SELECT value FROM %s WHERE name = ?", tableMeta),
		putMeta:        q("INSERT INTO %s (name, value) VALUES (?, ?) IF NOT EXISTS", tableMeta),
		block:          q("INSERT INTO %s (shard, series, reason, since) VALUES (0, ?, ?, ?)", tableBlocked),
		unblock:        q("DELETE FROM %s WHERE shard = 0 AND series = ?", tableBlocked),
		listBlocked:    q("SELECT series, reason, since FROM %s WHERE shard = 0", tableBlocked),
		isBlocked:      q("SELECT reason, since FROM %s WHERE shard = 0 AND series = ?", tableBlocked),

		readLabels:       q("SELECT labels, labels_pending FROM %s WHERE shard = ? AND id = ?", tableSeries),
		seriesLabels:     q("SELECT id, labels FROM %s WHERE shard = ? AND id IN ?", tableSeries),
		setLabels:        q("UPDATE %s USING TIMESTAMP ? SET labels = ? WHERE shard = ? AND id = ?", tableSeries),
		setLabelsPending: q("UPDATE %s USING TIMESTAMP ? SET labels = ?, labels_pending = ? WHERE shard = ? AND id = ?", tableSeries),
		clearPending:     q("UPDATE %s USING TIMESTAMP ? SET labels_pending = null WHERE shard = ? AND id = ?", tableSeries),
		addPosting:       q("INSERT INTO %s (name, value, shard, series) VALUES (?, ?, ?, ?) USING TIMESTAMP ?", tableLabelPostings),
		delPosting:       q("DELETE FROM %s USING TIMESTAMP ? WHERE name = ? AND value = ? AND shard = ? AND series = ?", tableLabelPostings),
		postings:         q("SELECT shard, series FROM %s WHERE name = ? AND value = ? AND shard IN ?", tableLabelPostings),
		anyPosting:       q("SELECT series FROM %s WHERE name = ? AND value = ? AND shard = ? LIMIT 1", tableLabelPostings),
		addValue:         q("INSERT INTO %s (name, shard, value) VALUES (?, ?, ?) USING TIMESTAMP ?", tableLabelValues),
		delValue:         q("DELETE FROM %s USING TIMESTAMP ? WHERE name = ? AND shard = ? AND value = ?", tableLabelValues),
		values:           q("SELECT shard, value FROM %s WHERE name = ? AND shard IN ?", tableLabelValues),
		anyValue:         q("SELECT value FROM %s WHERE name = ? AND shard = ? LIMIT 1", tableLabelValues),
		addName:          q("INSERT INTO %s (shard, name) VALUES (?, ?) USING TIMESTAMP ?", tableLabelNames),
		delName:          q("DELETE FROM %s USING TIMESTAMP ? WHERE shard = ? AND name = ?", tableLabelNames),
		names:            q("SELECT shard, name FROM %s WHERE shard IN ?", tableLabelNames),
	}
}

// ErrNotConnected is the error of every operation while no node of the
// cluster has answered yet (or the schema is not there yet); the error
// wrapping it gives the reason.
var ErrNotConnected = errors.New("cassandra: not connected")

// schemaError is a cluster that answers but lacks the keyspace or tables.
type schemaError struct{ error }

// Open connects to the cluster and checks that the keyspace holds the
// tables of p. It creates nothing: `gateway schema --apply` does. ctx bounds
// the schema check; connecting is bounded by ConnectTimeout, as the driver
// takes no context there.
//
// When no node answers, Open does not fail: it returns a store that keeps
// connecting in the background, with a backoff of up to ReconnectInterval,
// and fails every operation with ErrNotConnected until then, so that a
// gateway can start before its cluster (or while the cluster is down) and
// say why it is not ready. A cluster that answers but lacks the schema
// fails Open, as a configuration error.
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
	s := &Store{
		cfg: cfg, pyramid: p, log: log,
		tables:     map[tiers.Table]*tableStmts{},
		stmts:      newStmts(cfg.Keyspace),
		chunks:     newChunkStmts(cfg.Keyspace, tiers.TableRaw, kindRaw),
		sealedRows: newSealedRowsStmts(cfg.Keyspace),
		now:        cfg.Now,
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.SpeculativeDelay > 0 {
		s.spec = &gocql.SimpleSpeculativeExecution{NumAttempts: 1, TimeoutDelay: cfg.SpeculativeDelay}
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
	err := s.connect(ctx)
	if err == nil {
		close(s.done)
		return s, nil
	}
	var se schemaError
	if errors.As(err, &se) || ctx.Err() != nil {
		close(s.done)
		return nil, err
	}
	s.setReason(err)
	log.Warn("cassandra: no node answers; the store keeps trying in the background and fails requests until one does", "err", err)
	go s.keepConnecting()
	return s, nil
}

// connect opens a session and checks the schema; on success the store
// serves.
func (s *Store) connect(ctx context.Context) error {
	session, err := newSession(s.cfg, s.log)
	if err != nil {
		return err
	}
	if err := s.checkSchema(ctx, session, s.pyramid); err != nil {
		session.Close()
		return err
	}
	since, err := s.metaTime(ctx, session, metaMarksSince)
	if err != nil {
		session.Close()
		return err
	}
	s.marksSince.Store(since)
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		session.Close()
		return errors.New("cassandra: store closed")
	default:
	}
	s.reason = nil
	s.session.Store(session)
	return nil
}

// keepConnecting retries connect with a doubling wait, capped at
// ReconnectInterval, until it succeeds or the store is closed.
func (s *Store) keepConnecting() {
	defer close(s.done)
	wait := 100 * time.Millisecond
	for attempt := 2; ; attempt++ {
		select {
		case <-s.closing:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectTimeout+s.cfg.Timeout)
		err := s.connect(ctx)
		cancel()
		if err == nil {
			s.log.Info("cassandra: connected", "hosts", strings.Join(s.cfg.Hosts, ","), "attempts", attempt)
			return
		}
		s.setReason(err)
		if attempt&(attempt-1) == 0 { // a power of two: a log line that thins out
			s.log.Warn("cassandra: still not connected; retrying", "err", err, "attempt", attempt)
		}
		wait = min(2*wait, s.cfg.ReconnectInterval)
	}
}

// setReason records why the store is not connected.
func (s *Store) setReason(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reason = err
}

// sess is the session, or ErrNotConnected with the reason.
func (s *Store) sess() (*gocql.Session, error) {
	if session := s.session.Load(); session != nil {
		return session, nil
	}
	s.mu.Lock()
	reason := s.reason
	s.mu.Unlock()
	if reason == nil {
		reason = errors.New("store closed")
	}
	return nil, fmt.Errorf("%w: %w", ErrNotConnected, reason)
}

// read marks a query that only reads as idempotent, so that the driver may
// retry it on another host and, with a SpeculativeDelay, race a second
// replica against a slow one.
func (s *Store) read(q *gocql.Query) *gocql.Query {
	q = q.Idempotent(true)
	if s.spec != nil && s.secondHostUp() {
		q = q.SetSpeculativeExecutionPolicy(s.spec)
	}
	return q
}

// secondHostUp tells whether more than one node is up. With one, a
// speculative attempt finds no host and the driver fails the read at once
// (see lostRace); sending it again then doubles the node's work for every
// read slower than the delay — on a single node, all of them under load.
func (s *Store) secondHostUp() bool {
	now := time.Now().UnixNano()
	if at := s.hostsUpAt.Load(); now-at > int64(time.Second) && s.hostsUpAt.CompareAndSwap(at, now) {
		n := int64(0)
		if session := s.session.Load(); session != nil {
			for _, h := range session.GetHosts() {
				if h.IsUp() {
					n++
				}
			}
		}
		s.hostsUp.Store(n)
	}
	return s.hostsUp.Load() >= 2
}

// lostRace tells whether a read failed only because its speculative
// attempt found no second host: the driver then fails the read at once
// with ErrNoConnections, although the first attempt may still be on its
// way. Such a read is sent again without speculation (noSpeculation).
func (s *Store) lostRace(err error) bool {
	return s != nil && s.spec != nil && errors.Is(err, gocql.ErrNoConnections)
}

// readOne reads one row into dest with the query q builds, marked as a
// read, and sends it again without speculation when it lost the race.
func (s *Store) readOne(ctx context.Context, q func() *gocql.Query, dest ...any) error {
	_, err := retryLostRace(s, func() *gocql.Query { return s.read(q()) }, func(q *gocql.Query) (struct{}, error) {
		return struct{}{}, q.ScanContext(ctx, dest...)
	})
	return err
}

// retryLostRace reads with the query q builds, and reads again without
// speculation when the first read lost the race (see lostRace).
func retryLostRace[T any](s *Store, q func() *gocql.Query, read func(*gocql.Query) (T, error)) (T, error) {
	v, err := read(q())
	if s.lostRace(err) {
		v, err = read(noSpeculation(q()))
	}
	return v, err
}

// noSpeculation turns speculative execution off for one query.
func noSpeculation(q *gocql.Query) *gocql.Query {
	return q.SetSpeculativeExecutionPolicy(gocql.NonSpeculativeExecution{})
}

// weaker is the level a registry lookup falls back to when the configured
// one cannot be reached: one replica, in the local data center when the
// configured level is a local one.
func (s *Store) weaker() gocql.Consistency {
	if s.serial == gocql.LocalSerial {
		return gocql.LocalOne
	}
	return gocql.One
}

// tooFewReplicas tells whether err says that the configured consistency
// could not be reached, as opposed to a failure of the request itself.
func tooFewReplicas(err error) bool {
	var unavailable *gocql.RequestErrUnavailable
	var timeout *gocql.RequestErrReadTimeout
	return errors.As(err, &unavailable) || errors.As(err, &timeout)
}

// checkSchema fails when the keyspace or a table is missing, and warns when
// a tier table's default TTL no longer matches the configured retention
// (the tables are created once; later retention changes need ALTER TABLE).
func (s *Store) checkSchema(ctx context.Context, session *gocql.Session, p tiers.Pyramid) error {
	ks := s.cfg.Keyspace
	hint := fmt.Sprintf("run `gateway schema --apply --keyspace %s` with the same --cassandra-* flags first", ks)
	var name string
	err := session.Query("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).ScanContext(ctx, &name)
	if errors.Is(err, gocql.ErrNotFound) {
		return schemaError{fmt.Errorf("cassandra: keyspace %s does not exist: %s", ks, hint)}
	}
	if err != nil {
		return fmt.Errorf("cassandra: read the schema of keyspace %s: %w", ks, err)
	}
	ttls := map[string]int64{}
	iter := session.Query("SELECT table_name, default_time_to_live FROM system_schema.tables WHERE keyspace_name = ?", ks).IterContext(ctx)
	var table string
	var ttl int
	for iter.Scan(&table, &ttl) {
		ttls[table] = int64(ttl)
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("cassandra: read the tables of keyspace %s: %w", ks, err)
	}
	var missing []string
	for t, stmts := range s.tables {
		if _, ok := ttls[string(t)]; !ok {
			missing = append(missing, string(t))
		}
		if ct := chunkTable(t); stmts.kind == kindRollup {
			if _, ok := ttls[ct]; !ok {
				missing = append(missing, ct)
			}
		}
	}
	for _, t := range []string{tableRawChunks, tableSealedRowsDue, tableLateBuckets, tableSeries, tableSeriesLayout, tableRollupDirty, tableRollupState, tableMeta, tableBlocked,
		tableLabelPostings, tableLabelValues, tableLabelNames} {
		if _, ok := ttls[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return schemaError{fmt.Errorf("cassandra: keyspace %s lacks the tables %s: %s", ks, strings.Join(missing, ", "), hint)}
	}
	columns := []struct{ table, column string }{{tableLateBuckets, "version"}, {tableLateBuckets, "rewritten"}, {tableSeries, "generation"},
		{tableSeries, "labels"}, {tableSeries, "labels_pending"}}
	for _, l := range p.Rollups() {
		// Rollup rows keep their extras (sketch and counter) there.
		columns = append(columns, struct{ table, column string }{string(p.Tier(l).Table), "extras"})
	}
	for _, c := range columns {
		var col string
		err = session.Query("SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ? AND column_name = ?",
			ks, c.table, c.column).ScanContext(ctx, &col)
		if errors.Is(err, gocql.ErrNotFound) {
			return schemaError{fmt.Errorf("cassandra: table %s.%s lacks the column %s: %s", ks, c.table, c.column, hint)}
		}
		if err != nil {
			return fmt.Errorf("cassandra: read the columns of %s.%s: %w", ks, c.table, err)
		}
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

// Ping tells whether the store can serve: connected, and a read of one of
// its own partitions succeeds at the configured consistency (so a cluster
// with too few replicas up is not ready, although its nodes answer).
func (s *Store) Ping(ctx context.Context) error {
	session, err := s.sess()
	if err != nil {
		return err
	}
	var v []byte
	err = s.readOne(ctx, func() *gocql.Query { return session.Query(s.stmts.getMeta, "ping") }, &v)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("cassandra: read at %s: %w", s.cfg.Consistency, wrapCtx(ctx, err))
	}
	return nil
}

// Close stops connecting and closes the session. Every write has been
// acknowledged by the time it returned, so there is nothing to flush.
func (s *Store) Close() error {
	s.mu.Lock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.mu.Unlock()
	<-s.done
	if session := s.session.Swap(nil); session != nil {
		session.Close()
	}
	return nil
}
