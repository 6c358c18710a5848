// Command gateway is the time-series query gateway for Apache Cassandra.
//
//	gateway serve    serve the HTTP API (see -help for flags)
//	gateway schema   print the CQL of the configured tiers; --apply creates it
//	gateway token    print a new bearer token and its token-file line
//	gateway version  print the version
//
// Every flag can also be set as GATEWAY_<FLAG> in the environment or as a
// key of the YAML file given with --config.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Main is the program, with its environment made explicit so that tests
// can run it.
type Main struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	// Ready, when set, is called with the address the server listens on.
	Ready func(addr string)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := Main{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Run runs one subcommand and returns the process exit code.
func (m Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		m.usage(m.Stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = m.serve(ctx, args[1:])
	case "schema":
		err = m.schema(ctx, args[1:])
	case "token":
		err = m.token(args[1:])
	case "version", "--version", "-version":
		fmt.Fprintf(m.Stdout, "gateway %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		m.usage(m.Stdout)
		return 0
	default:
		fmt.Fprintf(m.Stderr, "gateway: unknown command %q\n", args[0])
		m.usage(m.Stderr)
		return 2
	}
	if err != nil {
		switch err {
		case errHelp:
			return 0
		case errUsage:
			return 2
		}
		fmt.Fprintf(m.Stderr, "gateway %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func (m Main) usage(w io.Writer) {
	fmt.Fprint(w, `usage: gateway <command> [flags]

commands:
  serve    serve the HTTP API (gateway serve -help lists the flags)
  schema   print the CQL for the configured tiers; --apply creates it
  token    print a new bearer token and its line of the token file (--name, --role)
  version  print the version

Every flag can also be set as GATEWAY_<FLAG> in the environment
or as a key of the YAML file given with --config.
`)
}
