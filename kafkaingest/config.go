package kafkaingest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tsgate/tsgate/params"
	"github.com/tsgate/tsgate/tiers"
)

// Config is the consumer's configuration; the consumer runs when Brokers
// is set.
type Config struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string
	// Topic is the topic points are consumed from, Group the consumer
	// group the gateways share its partitions in.
	Topic, Group string
	// DeadLetterTopic receives the records that can never be written;
	// "<Topic>.dead-letter" when empty.
	DeadLetterTopic string
	ClientID        string
	// Start is where a group that has committed nothing for a partition
	// starts: "earliest" (every record the topic keeps) or "latest".
	Start string
	// BatchPoints is how many points of consecutive records of a
	// partition are written at once.
	BatchPoints int
	// QueueBytes bounds the records fetched and not yet written, across
	// partitions; a partition whose share is full stops fetching.
	QueueBytes int
	// FetchMaxBytes bounds one fetch response (per broker).
	FetchMaxBytes int
	// RetryMax is the longest wait between two attempts of a write the
	// store did not take.
	RetryMax time.Duration
	// CommitInterval is how often written offsets are committed.
	CommitInterval time.Duration
	// SessionTimeout is how long the group waits for a silent member
	// before its partitions go to the others.
	SessionTimeout time.Duration
	// LagInterval is how often the partitions' end offsets are read for
	// the lag gauge.
	LagInterval time.Duration

	TLS  TLSConfig
	SASL SASLConfig
}

// TLSConfig is how the consumer reaches brokers over TLS.
type TLSConfig struct {
	Enabled bool
	// CAFile holds the PEM certificates that sign the brokers' (the
	// system's roots when empty).
	CAFile string
	// CertFile and KeyFile are a client certificate for mutual TLS.
	CertFile, KeyFile string
	// ServerName overrides the name the brokers' certificates are checked
	// against (the host of each broker address by default).
	ServerName string
}

// SASLConfig is how the consumer authenticates to brokers.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: none.
	Mechanism          string
	Username, Password string
}

// DefaultConfig returns the defaults; Brokers is empty (no consumer).
func DefaultConfig() Config {
	return Config{
		Group: "tsgate", ClientID: "tsgate", Start: "earliest",
		BatchPoints: 10_000, QueueBytes: 64 << 20, FetchMaxBytes: 16 << 20,
		RetryMax: 5 * time.Second, CommitInterval: time.Second, SessionTimeout: 45 * time.Second,
		LagInterval: 5 * time.Second,
	}
}

// Enabled reports whether a consumer is configured.
func (c Config) Enabled() bool { return len(c.Brokers) > 0 }

// deadLetterTopic is the topic of the records that can never be written.
func (c Config) deadLetterTopic() string {
	if c.DeadLetterTopic != "" {
		return c.DeadLetterTopic
	}
	return c.Topic + ".dead-letter"
}

// RegisterFlags adds the --kafka-* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(listFlag{&c.Brokers}, "kafka-brokers", "Kafka bootstrap brokers, comma separated host:port; set, the gateway consumes points from --kafka-topic")
	fs.StringVar(&c.Topic, "kafka-topic", c.Topic, "topic of point records (JSON or NDJSON in the /v1/points forms)")
	fs.StringVar(&c.Group, "kafka-group", c.Group, "consumer group the gateways share the topic's partitions in")
	fs.StringVar(&c.DeadLetterTopic, "kafka-dead-letter-topic", c.DeadLetterTopic, "topic the records that can never be written go to, with the reason (default <kafka-topic>.dead-letter)")
	fs.StringVar(&c.ClientID, "kafka-client-id", c.ClientID, "client id the gateway gives the brokers")
	fs.StringVar(&c.Start, "kafka-start", c.Start, "where a partition the group has committed nothing for starts: earliest or latest")
	fs.IntVar(&c.BatchPoints, "kafka-batch-points", c.BatchPoints, "points of consecutive records written to the store at once")
	fs.IntVar(&c.QueueBytes, "kafka-queue-bytes", c.QueueBytes, "bytes of records fetched and not yet written, across partitions; a partition whose share is full stops fetching")
	fs.IntVar(&c.FetchMaxBytes, "kafka-fetch-max-bytes", c.FetchMaxBytes, "bytes one fetch from a broker may return")
	fs.Var(durationFlag{&c.RetryMax}, "kafka-retry-max", "longest wait between attempts of a write the store did not take (the partition's fetching is paused meanwhile)")
	fs.Var(durationFlag{&c.CommitInterval}, "kafka-commit-interval", "how often the offsets of written records are committed")
	fs.Var(durationFlag{&c.SessionTimeout}, "kafka-session-timeout", "how long the group waits for a gateway that went silent before its partitions go to the others")
	fs.BoolVar(&c.TLS.Enabled, "kafka-tls", c.TLS.Enabled, "reach the brokers over TLS")
	fs.StringVar(&c.TLS.CAFile, "kafka-tls-ca", c.TLS.CAFile, "PEM file of the certificates that sign the brokers' (default: the system's)")
	fs.StringVar(&c.TLS.CertFile, "kafka-tls-cert", c.TLS.CertFile, "PEM client certificate for mutual TLS")
	fs.StringVar(&c.TLS.KeyFile, "kafka-tls-key", c.TLS.KeyFile, "PEM key of --kafka-tls-cert")
	fs.StringVar(&c.TLS.ServerName, "kafka-tls-server-name", c.TLS.ServerName, "name the brokers' certificates are checked against (default: each broker's host)")
	fs.StringVar(&c.SASL.Mechanism, "kafka-sasl-mechanism", c.SASL.Mechanism, "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&c.SASL.Username, "kafka-sasl-username", c.SASL.Username, "SASL user name")
	fs.StringVar(&c.SASL.Password, "kafka-sasl-password", c.SASL.Password, "SASL password (better given as GATEWAY_KAFKA_SASL_PASSWORD)")
}

// Validate reports every setting that cannot work, naming its flag. A
// configuration without brokers is valid: no consumer runs.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--kafka-brokers: %q is not host:port", b))
		}
	}
	if err := checkTopic(c.Topic); err != nil {
		errs = append(errs, fmt.Errorf("--kafka-topic: %w", err))
	}
	if err := checkTopic(c.deadLetterTopic()); c.Topic != "" && err != nil {
		errs = append(errs, fmt.Errorf("--kafka-dead-letter-topic: %w", err))
	}
	if c.deadLetterTopic() == c.Topic {
		errs = append(errs, errors.New("--kafka-dead-letter-topic must differ from --kafka-topic"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("--kafka-group must be set"))
	}
	if c.Start != "earliest" && c.Start != "latest" {
		errs = append(errs, fmt.Errorf("--kafka-start must be earliest or latest, not %q", c.Start))
	}
	if c.BatchPoints < 1 {
		errs = append(errs, errors.New("--kafka-batch-points must be at least 1"))
	}
	if c.FetchMaxBytes < 1024 {
		errs = append(errs, errors.New("--kafka-fetch-max-bytes must be at least 1024"))
	}
	if c.QueueBytes < c.FetchMaxBytes {
		errs = append(errs, errors.New("--kafka-queue-bytes must be at least --kafka-fetch-max-bytes"))
	}
	for name, d := range map[string]time.Duration{"retry-max": c.RetryMax, "commit-interval": c.CommitInterval, "session-timeout": c.SessionTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--kafka-%s must be positive", name))
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("--kafka-tls-cert and --kafka-tls-key go together"))
	}
	if !c.TLS.Enabled && (c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.ServerName != "") {
		errs = append(errs, errors.New("the --kafka-tls-* settings need --kafka-tls"))
	}
	if _, err := c.SASL.mechanism(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkTopic checks a topic name as Kafka does: 1 to 249 of [a-zA-Z0-9._-],
// not "." or "..".
func checkTopic(name string) error {
	if name == "" {
		return errors.New("must be set")
	}
	if len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("%q is not a topic name", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q is not a topic name (letters, digits, '.', '_' and '-')", name)
		}
	}
	return nil
}

// mechanism returns the SASL mechanism; nil for none.
func (s SASLConfig) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.Mechanism) {
	case "":
		if s.Username != "" || s.Password != "" {
			return nil, errors.New("--kafka-sasl-username and --kafka-sasl-password need --kafka-sasl-mechanism")
		}
		return nil, nil
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), s.needUser()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), s.needUser()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), s.needUser()
	}
	return nil, fmt.Errorf("--kafka-sasl-mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, not %q", s.Mechanism)
}

func (s SASLConfig) needUser() error {
	if s.Username == "" {
		return errors.New("--kafka-sasl-mechanism needs --kafka-sasl-username")
	}
	return nil
}

// tlsConfig loads the files of the TLS settings; nil when TLS is off.
func (t TLSConfig) tlsConfig() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--kafka-tls-ca: no PEM certificate in %s", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--kafka-tls-cert/--kafka-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// connOpts are the client options that say how to reach and authenticate
// to the brokers.
func (c Config) connOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(c.ClientID)}
	tc, err := c.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	mech, err := c.SASL.mechanism()
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// listFlag is a comma-separated list.
type listFlag struct{ p *[]string }

func (f listFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f listFlag) Set(s string) error {
	*f.p = nil
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f.p = append(*f.p, v)
		}
	}
	return nil
}

// durationFlag is a duration in the API's syntax (250ms, 5s, 1m).
type durationFlag struct{ p *time.Duration }

func (f durationFlag) String() string {
	if f.p == nil {
		return ""
	}
	return tiers.FormatDuration(f.p.Milliseconds())
}

func (f durationFlag) Set(s string) error {
	d, err := params.Duration(s)
	if err != nil {
		return err
	}
	*f.p = time.Duration(d) * time.Millisecond
	return nil
}
