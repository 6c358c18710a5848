package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/tsgate/tsgate/auth"
)

// loadTokens reads the token file, if one is configured, and re-reads it
// on SIGHUP until ctx ends; a file that fails to load then keeps the
// tokens in force. Without one, SIGHUP (which would end the process) only
// logs that there is nothing to reload, and it warns when the gateway
// listens beyond loopback, where anyone who reaches the port may read and
// write.
func loadTokens(ctx context.Context, c auth.Config, addr string, log *slog.Logger) (*auth.Tokens, error) {
	if c.TokensFile == "" {
		if !loopbackAddr(addr) {
			log.Warn("listening beyond loopback without --auth-tokens: every client that reaches this address may read, write and administer", "addr", addr)
		}
		onHangup(ctx, func() { log.Info("SIGHUP: nothing to reload (no --auth-tokens)") })
		return nil, nil
	}
	tokens, err := auth.Load(c.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("--auth-tokens: %w", err)
	}
	log.Info("authentication on", "tokens", tokens.Current().Len(), "file", c.TokensFile)
	onHangup(ctx, func() {
		if err := tokens.Reload(); err != nil {
			log.Error("token file not reloaded; the previous tokens stay in force", "err", err)
			return
		}
		log.Info("token file reloaded", "tokens", tokens.Current().Len())
	})
	return tokens, nil
}

// onHangup calls f on each SIGHUP until ctx ends. It takes the signal
// over at once, before it returns, and keeps it: once ctx ends the
// channel stays registered, so that a hangup while the gateway shuts down
// lands in its buffer or is dropped instead of ending the process.
func onHangup(ctx context.Context, f func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				f()
			}
		}
	}()
}

// loopbackAddr reports whether addr only listens on a loopback interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// token prints a new random token and the line of the token file that
// admits it: the file holds only the hash, so the token is shown once.
func (m Main) token(args []string) error {
	var name, role string
	err := m.parseFlags("token", args, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "the token's name, shown in logs and metrics (required)")
		fs.StringVar(&role, "role", "read", "read, write or admin")
	})
	if err != nil {
		return err
	}
	if name == "" {
		return errors.New("--name is required")
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return fmt.Errorf("--role: %w", err)
	}
	tok := auth.NewToken()
	fmt.Fprintf(m.Stdout, "token (give it to the client; it is not stored anywhere):\n%s\n\n", tok)
	fmt.Fprintf(m.Stdout, "line for the --auth-tokens file (under tokens:):\n%s\n", auth.FileLine(name, r, tok))
	return nil
}
