package cassandra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// newSession connects with the configured policies. log may be nil.
func newSession(cfg Config, log *slog.Logger) (*gocql.Session, error) {
	cons, err := parseConsistency(cfg.Consistency)
	if err != nil {
		return nil, err
	}
	c := gocql.NewCluster(cfg.Hosts...)
	c.Consistency = cons
	c.SerialConsistency = serialFor(cons)
	c.PageSize = cfg.PageSize
	c.Timeout = cfg.Timeout
	c.ConnectTimeout = cfg.ConnectTimeout
	c.NumConns = cfg.NumConns
	c.ReconnectInterval = cfg.ReconnectInterval
	// Idempotent statements (the reads and the data writes) go to the next
	// host once when their coordinator fails them (a node that died with
	// the request in flight, a timeout); the others are never resent.
	c.RetryPolicy = &gocql.SimpleRetryPolicy{NumRetries: 1}
	if m, err := parseAddressMap(cfg.AddressMap); err != nil {
		return nil, err
	} else if len(m) > 0 {
		c.AddressTranslator = gocql.AddressTranslatorFunc(func(ip net.IP, port int) (net.IP, int) {
			if to, ok := m[addrPort{ip.String(), port}]; ok {
				return net.ParseIP(to.ip), to.port
			}
			return ip, port
		})
	}
	// Every query names its partition key with bind markers, so the driver
	// can send it to a replica. Shuffling spreads a hot partition's reads
	// over all its replicas instead of always the first; saying so
	// explicitly also keeps the driver from warning about the default.
	fallback := gocql.RoundRobinHostPolicy()
	if cfg.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(cfg.LocalDC)
	}
	c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas())
	if cfg.Username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	if log != nil {
		c.Logger = driverLogger{log.With("component", "cassandra-driver")}
	}
	session, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("cassandra: connect to %s: %w", strings.Join(cfg.Hosts, ","), err)
	}
	return session, nil
}

// serialFor is the serial consistency that goes with c: LOCAL_SERIAL for
// the LOCAL_ levels, so that lightweight transactions stay in the local data
// center exactly when ordinary requests do.
func serialFor(c gocql.Consistency) gocql.Consistency {
	if c == gocql.LocalQuorum || c == gocql.LocalOne {
		return gocql.LocalSerial
	}
	return gocql.Serial
}

// driverLogger passes the driver's warnings and errors to slog. Its info
// and debug messages (every host added, every schema event) are dropped:
// the gateway's own log says what matters at those levels.
type driverLogger struct{ log *slog.Logger }

func (d driverLogger) Error(msg string, fields ...gocql.LogField) {
	d.emit(slog.LevelError, msg, fields)
}

func (d driverLogger) Warning(msg string, fields ...gocql.LogField) {
	d.emit(slog.LevelWarn, msg, fields)
}

func (driverLogger) Info(string, ...gocql.LogField)  {}
func (driverLogger) Debug(string, ...gocql.LogField) {}

func (d driverLogger) emit(level slog.Level, msg string, fields []gocql.LogField) {
	ctx := context.Background()
	if !d.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, len(fields))
	for i, f := range fields {
		attrs[i] = slog.Any(f.Name, f.Value.Any())
	}
	d.log.LogAttrs(ctx, level, msg, attrs...)
}

// wrapCtx makes sure a failure during which ctx ended says so to
// errors.Is. The driver returns ctx.Err() itself when it notices the context
// first, but a request can also fail otherwise (connection closed, client
// timeout) while its context ends; callers tell cancellation apart by
// errors.Is(err, context.Canceled).
func wrapCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
