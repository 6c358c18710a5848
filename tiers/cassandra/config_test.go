package cassandra

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; empty: valid
	}{
		{"no hosts", func(c *Config) { c.Hosts = nil }, "--cassandra-hosts must name at least one host"},
		{"bare host", func(c *Config) { c.Hosts = []string{"cass1", "10.0.0.2"} }, ""},
		{"ipv6", func(c *Config) { c.Hosts = []string{"[::1]:9042", "::1"} }, ""},
		{"bad port", func(c *Config) { c.Hosts = []string{"cass1:90420"} }, "port must be a number from 1 to 65535"},
		{"empty host", func(c *Config) { c.Hosts = []string{""} }, "empty host"},
		{"keyspace upper case", func(c *Config) { c.Keyspace = "TsGate" }, "--keyspace"},
		{"keyspace quote", func(c *Config) { c.Keyspace = "ts'gate" }, "--keyspace"},
		{"keyspace too long", func(c *Config) { c.Keyspace = strings.Repeat("k", 49) }, "--keyspace"},
		{"consistency lower case", func(c *Config) { c.Consistency = "local_one" }, ""},
		{"consistency unknown", func(c *Config) { c.Consistency = "MOST" }, `unknown consistency "MOST"`},
		{"consistency any", func(c *Config) { c.Consistency = "ANY" }, "ANY cannot serve reads"},
		{"consistency serial", func(c *Config) { c.Consistency = "LOCAL_SERIAL" }, "lightweight transactions only"},
		{"replication", func(c *Config) { c.Replication = "dc1:3, dc2:3" }, ""},
		{"replication simple", func(c *Config) { c.Replication = "simple:1" }, ""},
		{"replication no rf", func(c *Config) { c.Replication = "dc1" }, "--cassandra-replication"},
		{"replication zero", func(c *Config) { c.Replication = "dc1:0" }, "replication factor from 1 to 99"},
		{"replication twice", func(c *Config) { c.Replication = "dc1:1,dc1:2" }, "named twice"},
		{"replication injection", func(c *Config) { c.Replication = "dc'}:1" }, "data center names"},
		{"replication simple mixed", func(c *Config) { c.Replication = "simple:1,dc1:3" }, "cannot be combined"},
		{"page size", func(c *Config) { c.PageSize = 0 }, "--cassandra-page-size"},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "--cassandra-timeout must be positive"},
		{"connect timeout", func(c *Config) { c.ConnectTimeout = -time.Second }, "--cassandra-connect-timeout"},
		{"parallelism", func(c *Config) { c.WriteParallelism = 0 }, "--cassandra-write-parallelism"},
		{"batch rows", func(c *Config) { c.MaxBatchRows = 1 }, "--cassandra-max-batch-rows"},
		{"batch rows above the protocol", func(c *Config) { c.MaxBatchRows = 70000 }, "--cassandra-max-batch-rows"},
		{"user without password", func(c *Config) { c.Username = "gw" }, "must be set together"},
		{"credentials", func(c *Config) { c.Username, c.Password = "gw", "secret" }, ""},
		{"conns", func(c *Config) { c.NumConns = 0 }, "--cassandra-num-conns"},
		{"address map", func(c *Config) { c.AddressMap = "10.0.0.3:9042=127.0.1.3:19042, [::1]:9042=localhost:9043" }, ""},
		{"address map no target", func(c *Config) { c.AddressMap = "10.0.0.3:9042" }, "--cassandra-address-map: \"10.0.0.3:9042\": want ip:port=host:port"},
		{"address map host name source", func(c *Config) { c.AddressMap = "cass3:9042=127.0.0.1:19042" }, "--cassandra-address-map"},
		{"address map no port", func(c *Config) { c.AddressMap = "10.0.0.3=127.0.0.1:19042" }, "is not host:port"},
		{"address map bad port", func(c *Config) { c.AddressMap = "10.0.0.3:9042=127.0.0.1:0" }, "port must be a number from 1 to 65535"},
		{"address map twice", func(c *Config) { c.AddressMap = "10.0.0.3:9042=127.0.0.1:1,10.0.0.3:9042=127.0.0.1:2" }, "mapped twice"},
		{"address map same target ip", func(c *Config) { c.AddressMap = "10.0.0.3:9042=127.0.0.1:1,10.0.0.4:9042=127.0.0.1:2" }, "each needs an address of its own"},
		{"speculative off", func(c *Config) { c.SpeculativeDelay = 0 }, ""},
		{"speculative negative", func(c *Config) { c.SpeculativeDelay = -time.Millisecond }, "--cassandra-speculative-delay must not be negative"},
		{"reconnect interval", func(c *Config) { c.ReconnectInterval = 0 }, "--cassandra-reconnect-interval must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("no error, want one containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	// Every problem is reported at once.
	c := Config{}
	err := c.Validate()
	if n := strings.Count(err.Error(), "\n") + 1; n < 8 {
		t.Fatalf("the zero Config reported %d problems:\n%v", n, err)
	}
}

func TestFlags(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	// The defaults show as the configuration's values.
	for name, want := range map[string]string{
		"cassandra-hosts": "127.0.0.1:9042", "keyspace": "tsgate", "cassandra-consistency": "LOCAL_QUORUM",
		"cassandra-replication": "datacenter1:1", "cassandra-timeout": "10s", "cassandra-connect-timeout": "5s",
		"cassandra-page-size": "5000", "cassandra-write-parallelism": "8", "cassandra-max-batch-rows": "200",
		"cassandra-num-conns": "2", "cassandra-local-dc": "", "cassandra-username": "", "cassandra-password": "",
		"cassandra-address-map": "", "cassandra-speculative-delay": "50ms", "cassandra-reconnect-interval": "2s",
		"cassandra-sealed-rows-grace": "10m0s",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Fatalf("flag --%s is not registered", name)
		}
		if f.DefValue != want {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, want)
		}
	}
	err := fs.Parse([]string{
		"--cassandra-hosts", " cass1:9042, cass2 ,", "--keyspace", "metrics", "--cassandra-consistency", "QUORUM",
		"--cassandra-local-dc", "eu-west", "--cassandra-replication", "eu-west:3,us-east:3",
		"--cassandra-page-size", "1000", "--cassandra-timeout", "1m30s", "--cassandra-connect-timeout", "250ms",
		"--cassandra-write-parallelism", "4", "--cassandra-max-batch-rows", "50",
		"--cassandra-username", "gw", "--cassandra-password", "pw", "--cassandra-num-conns", "3",
		"--cassandra-address-map", "10.0.0.3:9042=127.0.0.1:19042", "--cassandra-speculative-delay", "0",
		"--cassandra-reconnect-interval", "500ms", "--cassandra-sealed-rows-grace", "1m",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Hosts: []string{"cass1:9042", "cass2"}, Keyspace: "metrics", Consistency: "QUORUM", LocalDC: "eu-west",
		Replication: "eu-west:3,us-east:3", PageSize: 1000, Timeout: 90 * time.Second, ConnectTimeout: 250 * time.Millisecond,
		WriteParallelism: 4, MaxBatchRows: 50, Username: "gw", Password: "pw", NumConns: 3,
		AddressMap: "10.0.0.3:9042=127.0.0.1:19042", SpeculativeDelay: 0, ReconnectInterval: 500 * time.Millisecond,
		SealedRowsGrace: time.Minute,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed\n %+v\nwant\n %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--cassandra-timeout", "7d"},
		{"--cassandra-timeout", "10"},
		{"--cassandra-hosts", " , "},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c := DefaultConfig()
		c.RegisterFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q parsed without error", args)
		}
	}
}

func TestReplicationMap(t *testing.T) {
	got, err := replicationMap("dc1:3, dc2:2")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"class", "NetworkTopologyStrategy"}, {"dc1", "3"}, {"dc2", "2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got, err = replicationMap("simple:1")
	if err != nil {
		t.Fatal(err)
	}
	want = [][2]string{{"class", "SimpleStrategy"}, {"replication_factor", "1"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseAddressMap(t *testing.T) {
	got, err := parseAddressMap(" 10.0.0.3:9042=127.0.0.1:19042 ,[fe80::1]:9042=[::1]:9043")
	if err != nil {
		t.Fatal(err)
	}
	want := map[addrPort]addrPort{
		{"10.0.0.3", 9042}: {"127.0.0.1", 19042},
		{"fe80::1", 9042}:  {"::1", 9043},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, err := parseAddressMap(""); err != nil || len(got) != 0 {
		t.Fatalf("empty map: %v, %v", got, err)
	}
}

func TestDriverLoggerKeepsWarningsAndErrors(t *testing.T) {
	var buf bytes.Buffer
	l := driverLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Debug("dropped debug")
	l.Info("dropped info", gocql.NewLogFieldString("host", "h"))
	l.Warning("host down", gocql.NewLogFieldString("host", "10.0.0.1"), gocql.NewLogFieldInt("port", 9042))
	l.Error("failed", gocql.NewLogFieldError("err", errors.New("boom")))
	out := buf.String()
	if strings.Contains(out, "dropped") {
		t.Fatalf("info or debug reached the log:\n%s", out)
	}
	for _, want := range []string{"level=WARN msg=\"host down\" host=10.0.0.1 port=9042", "level=ERROR msg=failed err=boom"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestWrapCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	other := errors.New("gocql: connection closed")
	if err := wrapCtx(ctx, other); err != other {
		t.Fatalf("live context: got %v", err)
	}
	cancel()
	err := wrapCtx(ctx, other)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), other.Error()) {
		t.Fatalf("cancelled context: got %v", err)
	}
	if err := wrapCtx(ctx, context.Canceled); err != context.Canceled {
		t.Fatalf("already a context error: got %v", err)
	}
}
