// Command gateway is the time-series query gateway for Apache Cassandra.
//
//	gateway serve    serve the HTTP API (see -help for flags)
//	gateway schema   print the CQL of the configured tiers; --apply creates it
//	gateway import   import history from NDJSON or CSV files or stdin
//	gateway token    print a new bearer token and its token-file line
//	gateway size     print the layout the sizing rule gives for a write rate
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
	"time"

	"github.com/tsgate/tsgate/gateway"
	"github.com/tsgate/tsgate/tiers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Main is the program, with its environment made explicit so that tests
// can run it.
type Main struct {
	Stdout, Stderr io.Writer
	// Stdin is read by import; os.Stdin when nil.
	Stdin     io.Reader
	LookupEnv func(string) (string, bool)
	// Ready, when set, is called with the address the server listens on.
	Ready func(addr string)
	// Now is the clock that decides what data is current (retention,
	// lateness, "now" in queries); time.Now when nil.
	Now func() time.Time

	// openStore opens the configured store; gateway.OpenStore when nil.
	// Tests give a store that is unreachable until they say otherwise.
	openStore func(context.Context, gateway.Config, gateway.Options) (tiers.Store, error)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := Main{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, LookupEnv: os.LookupEnv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// clock is the program's clock.
func (m Main) clock() func() time.Time {
	if m.Now == nil {
		return time.Now
	}
	return m.Now
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
	case "import":
		err = m.importCmd(ctx, args[1:])
	case "token":
		err = m.token(args[1:])
	case "size":
		err = m.size(ctx, args[1:])
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
  import   import history (NDJSON or CSV, files or stdin) into the store
           or through a gateway (gateway import -help lists the flags)
  token    print a new bearer token and its line of the token file (--name, --role)
  size     the bucket widths and event buckets the sizing rule gives for
           a write rate (gateway size --rate 10/s --row-bytes 30 --target 50MB)
  version  print the version

Every flag can also be set as GATEWAY_<FLAG> in the environment
or as a key of the YAML file given with --config.
`)
}
