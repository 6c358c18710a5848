package cassandra

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Config says how to reach the cluster and how to talk to it.
type Config struct {
	// Hosts are the contact points, host or host:port (port 9042 when
	// omitted); the driver discovers the rest of the ring from them.
	Hosts []string
	// Keyspace holds every table of the store.
	Keyspace string
	// Consistency is the level of every read and write, by its CQL name
	// (LOCAL_QUORUM, QUORUM, LOCAL_ONE, ONE, ...).
	Consistency string
	// LocalDC, when set, keeps queries in that data center (token-aware
	// over DC-aware round robin); empty means every node is a candidate
	// (token-aware over plain round robin).
	LocalDC string
	// Replication is the keyspace's replication, used only when the schema
	// is created: "dc1:3,dc2:3" (NetworkTopologyStrategy, replicas per data
	// center) or "simple:N" (SimpleStrategy, for single-DC test clusters).
	Replication string
	// PageSize caps the rows the driver fetches per round trip; a read
	// asking for smaller pages gets them.
	PageSize int
	// Timeout bounds one request on the client side; ConnectTimeout bounds
	// dialing and connection setup.
	Timeout, ConnectTimeout time.Duration
	// WriteParallelism is how many batches one Write call keeps in flight.
	WriteParallelism int
	// MaxBatchRows is the most statements in one UNLOGGED batch; a batch
	// never spans partitions.
	MaxBatchRows int
	// Username and Password, when set, authenticate with Cassandra's
	// PasswordAuthenticator.
	Username, Password string
	// NumConns is the number of connections per host.
	NumConns int
	// Now is the clock that decides expiry (rows already past their
	// retention are not written, TTLs count from it); time.Now when nil.
	// The gateway passes its own clock, as it does to the embedded store.
	Now func() time.Time
}

// DefaultConfig returns the settings of a local single-node cluster: the
// defaults let `gateway schema --apply` and `gateway serve --store
// cassandra` work against a development node out of the box. Production
// clusters set --cassandra-replication (e.g. "dc1:3") and
// --cassandra-local-dc.
func DefaultConfig() Config {
	return Config{
		Hosts:            []string{"127.0.0.1:9042"},
		Keyspace:         "tsgate",
		Consistency:      "LOCAL_QUORUM",
		Replication:      "datacenter1:1",
		PageSize:         5000,
		Timeout:          10 * time.Second,
		ConnectTimeout:   5 * time.Second,
		WriteParallelism: 8,
		MaxBatchRows:     200,
		NumConns:         2,
	}
}

// RegisterFlags adds the --cassandra-* flags (and --keyspace) to fs, with
// c's current values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(hostsFlag{&c.Hosts}, "cassandra-hosts", "Cassandra contact points, comma separated host[:port]")
	fs.StringVar(&c.Keyspace, "keyspace", c.Keyspace, "Cassandra keyspace of the store")
	fs.StringVar(&c.Consistency, "cassandra-consistency", c.Consistency, "consistency level of reads and writes (LOCAL_QUORUM, QUORUM, LOCAL_ONE, ONE, ...)")
	fs.StringVar(&c.LocalDC, "cassandra-local-dc", c.LocalDC, "data center to send queries to (empty: any)")
	fs.StringVar(&c.Replication, "cassandra-replication", c.Replication, `keyspace replication for "schema --apply": dc:rf[,dc:rf...] or simple:rf`)
	fs.IntVar(&c.PageSize, "cassandra-page-size", c.PageSize, "most rows the driver fetches per round trip")
	fs.Var(durationFlag{&c.Timeout}, "cassandra-timeout", "client-side timeout of one request (Go duration, e.g. 10s)")
	fs.Var(durationFlag{&c.ConnectTimeout}, "cassandra-connect-timeout", "timeout of dialing and connection setup (Go duration)")
	fs.IntVar(&c.WriteParallelism, "cassandra-write-parallelism", c.WriteParallelism, "batches one write keeps in flight")
	fs.IntVar(&c.MaxBatchRows, "cassandra-max-batch-rows", c.MaxBatchRows, "statements per UNLOGGED batch (each batch holds one partition)")
	fs.StringVar(&c.Username, "cassandra-username", c.Username, "user name for PasswordAuthenticator (empty: no authentication)")
	fs.StringVar(&c.Password, "cassandra-password", c.Password, "password for PasswordAuthenticator")
	fs.IntVar(&c.NumConns, "cassandra-num-conns", c.NumConns, "connections per Cassandra host")
}

// maxBatchStatements is the protocol's limit on the statements of one batch
// (an unsigned short).
const maxBatchStatements = 65535

// Validate reports every setting that cannot work, naming its flag.
func (c Config) Validate() error {
	var errs []error
	if len(c.Hosts) == 0 {
		errs = append(errs, errors.New("--cassandra-hosts must name at least one host"))
	}
	for _, h := range c.Hosts {
		if err := checkHost(h); err != nil {
			errs = append(errs, fmt.Errorf("--cassandra-hosts: %w", err))
		}
	}
	if !validIdentifier(c.Keyspace) {
		errs = append(errs, fmt.Errorf("--keyspace %q must be 1 to 48 lower-case letters, digits and underscores, starting with a letter", c.Keyspace))
	}
	if _, err := parseConsistency(c.Consistency); err != nil {
		errs = append(errs, fmt.Errorf("--cassandra-consistency: %w", err))
	}
	if _, err := replicationMap(c.Replication); err != nil {
		errs = append(errs, fmt.Errorf("--cassandra-replication: %w", err))
	}
	if c.PageSize < 1 {
		errs = append(errs, errors.New("--cassandra-page-size must be at least 1"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("--cassandra-timeout must be positive"))
	}
	if c.ConnectTimeout <= 0 {
		errs = append(errs, errors.New("--cassandra-connect-timeout must be positive"))
	}
	if c.WriteParallelism < 1 {
		errs = append(errs, errors.New("--cassandra-write-parallelism must be at least 1"))
	}
	if c.MaxBatchRows < 2 || c.MaxBatchRows > maxBatchStatements {
		// Two, because a registry update is two statements that belong in
		// one batch.
		errs = append(errs, fmt.Errorf("--cassandra-max-batch-rows must be between 2 and %d", maxBatchStatements))
	}
	if (c.Username == "") != (c.Password == "") {
		errs = append(errs, errors.New("--cassandra-username and --cassandra-password must be set together"))
	}
	if c.NumConns < 1 {
		errs = append(errs, errors.New("--cassandra-num-conns must be at least 1"))
	}
	return errors.Join(errs...)
}

func checkHost(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	if !strings.Contains(h, ":") || (strings.Count(h, ":") > 1 && !strings.HasPrefix(h, "[")) {
		return nil // a bare host name or IPv4/IPv6 address
	}
	_, port, err := net.SplitHostPort(h)
	if err != nil {
		return fmt.Errorf("%q: want host or host:port ([ipv6]:port)", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 1 to 65535", h)
	}
	return nil
}

var identifierRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// validIdentifier accepts the names that CQL stores as written when they
// are not quoted, so the keyspace can be spliced into statements as is.
func validIdentifier(s string) bool { return identifierRE.MatchString(s) }

// parseConsistency maps a CQL consistency name to the driver's level,
// refusing the levels that cannot serve both reads and writes.
func parseConsistency(s string) (gocql.Consistency, error) {
	c, err := gocql.ParseConsistencyWrapper(s)
	if err != nil {
		return 0, fmt.Errorf("unknown consistency %q (want LOCAL_QUORUM, QUORUM, LOCAL_ONE, ONE, TWO, THREE, EACH_QUORUM or ALL)", s)
	}
	switch c {
	case gocql.Any:
		return 0, errors.New("ANY cannot serve reads; use ONE or LOCAL_ONE for the weakest level")
	case gocql.Serial, gocql.LocalSerial:
		return 0, fmt.Errorf("%s applies to lightweight transactions only; the store picks it itself where it needs one", c)
	}
	return c, nil
}

var dcNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// replicationMap parses --cassandra-replication into the CQL map literal's
// entries, class first.
func replicationMap(s string) ([][2]string, error) {
	const usage = `want dc:rf[,dc:rf...] (NetworkTopologyStrategy) or simple:rf (SimpleStrategy), e.g. "datacenter1:3"`
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty; " + usage)
	}
	var dcs [][2]string
	seen := map[string]bool{}
	simple := false
	for part := range strings.SplitSeq(s, ",") {
		name, rf, ok := strings.Cut(strings.TrimSpace(part), ":")
		name, rf = strings.TrimSpace(name), strings.TrimSpace(rf)
		n, err := strconv.Atoi(rf)
		if !ok || err != nil || n < 1 || n > 99 {
			return nil, fmt.Errorf("%q: %s, with a replication factor from 1 to 99", part, usage)
		}
		if !dcNameRE.MatchString(name) {
			return nil, fmt.Errorf("%q: data center names are letters, digits, '_', '.' and '-'", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("data center %q is named twice", name)
		}
		seen[name] = true
		if name == "simple" {
			simple = true
		}
		dcs = append(dcs, [2]string{name, strconv.Itoa(n)})
	}
	if simple {
		if len(dcs) > 1 {
			return nil, errors.New(`"simple:rf" cannot be combined with data centers`)
		}
		return [][2]string{{"class", "SimpleStrategy"}, {"replication_factor", dcs[0][1]}}, nil
	}
	return append([][2]string{{"class", "NetworkTopologyStrategy"}}, dcs...), nil
}

// hostsFlag is a comma separated list of hosts.
type hostsFlag struct{ p *[]string }

func (f hostsFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f hostsFlag) Set(s string) error {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		return errors.New("no hosts given")
	}
	*f.p = out
	return nil
}

// durationFlag is a time.Duration in Go syntax (500ms, 10s, 1m30s).
type durationFlag struct{ p *time.Duration }

func (f durationFlag) String() string {
	if f.p == nil {
		return ""
	}
	return f.p.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a Go duration such as 500ms, 10s or 1m: %w", err)
	}
	*f.p = d
	return nil
}
