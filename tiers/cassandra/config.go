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
	// AddressMap rewrites the addresses of nodes the driver discovers (or
	// is told about in events): "host:port=host:port,...", for nodes that
	// are reachable through a proxy or NAT under another address than the
	// one they advertise. Contact points are dialed as given. The driver
	// tells nodes apart by IP address, so every node needs a target IP of
	// its own (on loopback, 127.0.1.1, 127.0.1.2, ...).
	AddressMap string
	// SpeculativeDelay, when positive, sends an idempotent read to the next
	// replica too when the first has not answered within it, and takes
	// whichever answers first; 0 disables speculative execution. Reads do
	// not speculate while only one node is up.
	SpeculativeDelay time.Duration
	// ReconnectInterval is how often nodes marked down are tried again, and
	// the longest wait between attempts while no node has answered yet.
	ReconnectInterval time.Duration
	// SealedRowsGrace is how long a sealed partition keeps its rows after
	// its chunks were written: a read that began before the chunks
	// existed reads the rows, so they are deleted only once such reads are
	// over. 0 deletes them in the same seal, which is safe only when no
	// read runs meanwhile.
	SealedRowsGrace time.Duration
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

		SpeculativeDelay:  defaultSpeculativeDelay,
		ReconnectInterval: 2 * time.Second,
		SealedRowsGrace:   10 * time.Minute,
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
	fs.Var(durationFlag{&c.SealedRowsGrace}, "cassandra-sealed-rows-grace", "how long a sealed partition keeps its rows after its chunks are written, longer than any read lasts; the seal worker deletes them after it (Go duration)")
	fs.StringVar(&c.AddressMap, "cassandra-address-map", c.AddressMap, "rewrite discovered node addresses, e.g. 10.0.0.3:9042=127.0.0.1:19042,... (nodes behind a proxy or NAT)")
	fs.Var(durationFlag{&c.SpeculativeDelay}, "cassandra-speculative-delay", "send an idempotent read to a second replica when the first has not answered within this (0 disables)")
	fs.Var(durationFlag{&c.ReconnectInterval}, "cassandra-reconnect-interval", "how often nodes marked down are retried, and the longest wait between connection attempts while no node answers")
}

// defaultSpeculativeDelay is a few times a healthy partition read's p99 on
// a local cluster (docs/benchmarks.md): late enough that healthy reads never
// cost a second request, early enough to hide a replica that stalls.
const defaultSpeculativeDelay = 50 * time.Millisecond

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
	if _, err := parseAddressMap(c.AddressMap); err != nil {
		errs = append(errs, fmt.Errorf("--cassandra-address-map: %w", err))
	}
	if c.SpeculativeDelay < 0 {
		errs = append(errs, errors.New("--cassandra-speculative-delay must not be negative (0 disables speculative reads)"))
	}
	if c.ReconnectInterval <= 0 {
		errs = append(errs, errors.New("--cassandra-reconnect-interval must be positive"))
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

// addrPort is an IP address and port, as the driver reports nodes.
type addrPort struct {
	ip   string // net.IP.String() form
	port int
}

// parseAddressMap parses "ip:port=host:port,..." into the rewrites of the
// address translator. Sources are IP addresses, since that is how nodes
// advertise themselves; targets may be host names, resolved once here.
func parseAddressMap(s string) (map[addrPort]addrPort, error) {
	out := map[addrPort]addrPort{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		from, to, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want ip:port=host:port", entry)
		}
		src, err := parseAddrPort(strings.TrimSpace(from), false)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		dst, err := parseAddrPort(strings.TrimSpace(to), true)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		if _, dup := out[src]; dup {
			return nil, fmt.Errorf("%s:%d is mapped twice", src.ip, src.port)
		}
		for _, d := range out {
			if d.ip == dst.ip {
				return nil, fmt.Errorf("two nodes are mapped to %s: the driver tells nodes apart by IP address, so each needs an address of its own", dst.ip)
			}
		}
		out[src] = dst
	}
	return out, nil
}

func parseAddrPort(s string, resolve bool) (addrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return addrPort{}, fmt.Errorf("%q is not host:port ([ipv6]:port)", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return addrPort{}, fmt.Errorf("%q: port must be a number from 1 to 65535", s)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		if !resolve {
			return addrPort{}, fmt.Errorf("%q: a node is matched by its IP address, not a host name", s)
		}
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return addrPort{}, fmt.Errorf("%q: cannot resolve %s: %v", s, host, err)
		}
		ip = ips[0]
	}
	return addrPort{ip.String(), n}, nil
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
