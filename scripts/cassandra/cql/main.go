// Command cql runs one CQL statement against a Cassandra cluster and prints
// the result rows, tab-separated, after a header line of column names.
// Statements without a result (DDL, DML) print nothing. On failure it prints
// the error and exits non-zero.
//
// It is used by scripts/cassandra.sh for its readiness check and its cql
// subcommand:
//
//	cql [-hosts h1:9042,h2:9042] [-only] [-timeout 10s] [-retry-for 0] STATEMENT...
//
// -only keeps the statement on the given hosts: the driver neither connects
// to nor routes to the nodes it discovers, so a query of system.local or
// system.peers answers for exactly the named node.
//
// The words after the flags are joined with spaces into the statement.
// -retry-for keeps retrying the connection and the statement until it
// succeeds or the duration has elapsed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func main() {
	hostsDefault := os.Getenv("CASSANDRA_HOSTS")
	if hostsDefault == "" {
		hostsDefault = "127.0.0.1:9042"
	}
	hosts := flag.String("hosts", hostsDefault, "comma-separated host:port list (default from CASSANDRA_HOSTS)")
	timeout := flag.Duration("timeout", 10*time.Second, "connect and query timeout of one attempt")
	only := flag.Bool("only", false, "connect to the given hosts only, not to the nodes they list as peers")
	retryFor := flag.Duration("retry-for", 0, "keep retrying connection and statement until this much time has passed")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: cql [flags] STATEMENT...\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	stmt := strings.TrimSpace(strings.Join(flag.Args(), " "))
	stmt = strings.TrimSuffix(stmt, ";")
	if stmt == "" {
		flag.Usage()
		os.Exit(2)
	}

	deadline := time.Now().Add(*retryFor)
	for attempt := 1; ; attempt++ {
		err := run(os.Stdout, splitHosts(*hosts), *only, *timeout, stmt)
		if err == nil {
			return
		}
		if time.Now().Add(time.Second).After(deadline) {
			fmt.Fprintf(os.Stderr, "cql: %v\n", err)
			os.Exit(1)
		}
		time.Sleep(time.Second)
	}
}

func splitHosts(s string) []string {
	var hosts []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// run connects, executes stmt and writes its rows to w. Output is buffered
// until the whole result has been read, so a failed attempt prints nothing.
func run(w io.Writer, hosts []string, only bool, timeout time.Duration, stmt string) error {
	if len(hosts) == 0 {
		return errors.New("no hosts given")
	}
	cluster := gocql.NewCluster(hosts...)
	cluster.Timeout = timeout
	cluster.ConnectTimeout = timeout
	cluster.Consistency = gocql.One
	cluster.NumConns = 1
	cluster.Logger = gocql.NewLogger(gocql.LogLevelNone)
	if only {
		cluster.HostFilter = gocql.WhiteListHostFilter(hosts...)
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return fmt.Errorf("connect to %s: %w", strings.Join(hosts, ","), err)
	}
	defer session.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	iter := session.Query(stmt).IterContext(ctx)

	var out strings.Builder
	if cols := iter.Columns(); len(cols) > 0 {
		rd, err := iter.RowData()
		if err != nil {
			iter.Close()
			return err
		}
		// Scan into pointers to pointers so that NULL (a nil pointer) can be
		// told apart from a zero value.
		for i, v := range rd.Values {
			rd.Values[i] = reflect.New(reflect.TypeOf(v)).Interface()
		}
		out.WriteString(strings.Join(rd.Columns, "\t"))
		out.WriteByte('\n')
		for iter.Scan(rd.Values...) {
			for i, v := range rd.Values {
				if i > 0 {
					out.WriteByte('\t')
				}
				out.WriteString(format(v))
			}
			out.WriteByte('\n')
		}
	}
	if err := iter.Close(); err != nil {
		return err
	}
	_, err = io.WriteString(w, out.String())
	return err
}

// format renders a scanned value (a pointer filled by Scan) for output.
func format(v any) string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		rv = rv.Elem()
	}
	switch x := rv.Interface().(type) {
	case []byte:
		if x == nil {
			return "null"
		}
		return fmt.Sprintf("0x%x", x)
	case time.Time:
		if x.IsZero() {
			return "null"
		}
		return x.UTC().Format(time.RFC3339Nano)
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(rv.Interface())
}
