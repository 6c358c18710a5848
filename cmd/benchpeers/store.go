package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// The gateway's store: its embedded store in the scratch directory, or a
// keyspace of the Cassandra node at -cassandra-hosts (started by
// scripts/cassandra.sh), emptied at the start of a run.

// storeFlags are the gateway's flags naming its store.
func (c config) storeFlags() []string {
	if c.store == "cassandra" {
		return []string{"--store", "cassandra", "--cassandra-hosts", c.cassandraHosts, "--keyspace", c.keyspace}
	}
	return []string{"--store", "embedded", "--data-dir", filepath.Join(c.scratch, "gateway")}
}

// storeName names the gateway's store in the report.
func (c config) storeName() string {
	if c.store == "cassandra" {
		return "gateway (Cassandra node)"
	}
	return "gateway (embedded)"
}

// session connects to the node.
func (c config) session() (*gocql.Session, error) {
	cluster := gocql.NewCluster(strings.Split(c.cassandraHosts, ",")...)
	cluster.Timeout = 30 * time.Second
	cluster.ConnectTimeout = 10 * time.Second
	return cluster.CreateSession()
}

// prepareStore empties the gateway's keyspace and creates it anew with
// the gateway's schema (`gateway schema --apply`); nothing for the
// embedded store, whose directory the run starts empty.
func (b *bench) prepareStore(ctx context.Context) error {
	if b.c.store != "cassandra" {
		return nil
	}
	s, err := b.c.session()
	if err != nil {
		return fmt.Errorf("connect to %s: %w", b.c.cassandraHosts, err)
	}
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + b.c.keyspace).ExecContext(ctx); err != nil {
		return fmt.Errorf("drop keyspace %s: %w", b.c.keyspace, err)
	}
	// The node keeps a dropped keyspace's tables as a snapshot, which
	// every run would add to.
	if err := os.RemoveAll(filepath.Join(b.c.cassandraData, b.c.keyspace)); err != nil {
		return err
	}
	_, _, err = runTool(ctx, filepath.Join(filepath.Dir(b.gw.log), "import.log"), b.gw.bin,
		append([]string{"schema", "--apply"}, b.c.storeFlags()...)...)
	return err
}

// gatewayDisk is what the gateway's data takes on disk: the embedded
// store's directory, or the keyspace's tables on the node once every
// memtable is flushed (the node's commit log, shared by every keyspace,
// is not counted).
func (b *bench) gatewayDisk(ctx context.Context) (total, wal int64, err error) {
	if b.c.store != "cassandra" {
		return diskUse(filepath.Join(b.c.scratch, "gateway"))
	}
	dir := filepath.Join(b.c.cassandraData, b.c.keyspace)
	if _, err := os.Stat(dir); err != nil {
		return 0, 0, fmt.Errorf("the node's data directory (-cassandra-data): %w", err)
	}
	if b.c.nodetool != "" {
		// Live bytes, as an operator counts them: flushed, and compacted,
		// which drops the rows seals deleted (gc_grace keeps only their
		// tombstones).
		words := strings.Fields(b.c.nodetool)
		for _, cmd := range [][]string{{"flush", b.c.keyspace}, {"compact", b.c.keyspace}} {
			out, err := exec.CommandContext(ctx, words[0], append(words[1:], cmd...)...).CombinedOutput()
			if err != nil {
				return 0, 0, fmt.Errorf("nodetool %s: %w: %s", strings.Join(cmd, " "), err, out)
			}
		}
		return b.keyspaceBytes(dir)
	}
	// No nodetool: a table whose memtable flush period is short flushes by
	// itself, and nothing is compacted.
	s, err := b.c.session()
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	iter := s.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", b.c.keyspace).IterContext(ctx)
	var table string
	var tables []string
	for iter.Scan(&table) {
		tables = append(tables, table)
	}
	if err := iter.Close(); err != nil {
		return 0, 0, err
	}
	for _, t := range tables {
		if err := s.Query(fmt.Sprintf("ALTER TABLE %s.%s WITH memtable_flush_period_in_ms = 1000", b.c.keyspace, t)).ExecContext(ctx); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	return b.keyspaceBytes(dir)
}

// keyspaceBytes counts the keyspace's tables in the node's data
// directory dir, snapshots left out, and logs them by table.
func (b *bench) keyspaceBytes(dir string) (total, wal int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	var parts []string
	for _, e := range entries {
		n, _, err := diskUse(filepath.Join(dir, e.Name()))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, 0, err
		}
		// Snapshots (of truncated or dropped tables) are not the data.
		if s, _, err := diskUse(filepath.Join(dir, e.Name(), "snapshots")); err == nil {
			n -= s
		}
		total += n
		if n >= 1<<20 {
			table, _, _ := strings.Cut(e.Name(), "-")
			parts = append(parts, fmt.Sprintf("%s %.1f MiB", table, float64(n)/(1<<20)))
		}
	}
	// Rows deleted by seals stay on disk until compaction drops them.
	logf("gateway keyspace on disk: %.1f MiB (%s)", float64(total)/(1<<20), strings.Join(parts, ", "))
	return total, 0, nil
}

// sealedRowsGrace is how long the import's seals keep the rows they
// folded into chunks on the node.
const sealedRowsGrace = 20 * time.Second

// The seal worker's metrics firstSealRun watches.
var (
	sealRunsMetric    = regexp.MustCompile(`(?m)^tsgate_seal_runs_total ([0-9.e+]+)$`)
	rowsDeletedMetric = regexp.MustCompile(`(?m)^tsgate_seal_rows_deleted_partitions_total .*$`)
)

// firstSealRun starts the gateway and waits for its seal worker's first
// run, then stops it: a gateway serving the imported data would have run
// it long before anyone looks at a dashboard, and it would otherwise run
// (over every partition, as it has no checkpoint yet) beside the timings
// after every restart. On the node that run also deletes the rows the
// import's seals kept (their grace is over by then), so that the reads
// timed and the bytes counted are those of the sealed keyspace.
func (b *bench) firstSealRun(ctx context.Context) error {
	if b.c.store == "cassandra" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sealedRowsGrace + time.Second):
		}
	}
	t0 := time.Now()
	if err := b.gw.start(ctx, 2*time.Minute); err != nil {
		return err
	}
	defer b.gw.stop()
	for {
		body, _, err := fetch(b.client, b.gw.url+"/metrics")
		if err != nil {
			return err
		}
		if m := sealRunsMetric.FindSubmatch(body); m != nil && string(m[1]) != "0" {
			logf("gateway: first seal run over in %.1f s (%s)", time.Since(t0).Seconds(), rowsDeletedMetric.Find(body))
			return nil
		}
		if time.Since(t0) > 20*time.Minute {
			return fmt.Errorf("the gateway's first seal run did not end within %v (log %s)", time.Since(t0).Round(time.Second), b.gw.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
