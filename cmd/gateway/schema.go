package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/tsgate/tsgate/tiers/cassandra"
)

// schema prints the CQL that matches the configured tiers and, with
// --apply, creates the keyspace and tables (idempotently).
func (m Main) schema(ctx context.Context, args []string) error {
	c := defaultServeConfig()
	apply := false
	err := m.parseFlags("schema", args, func(fs *flag.FlagSet) {
		c.registerStoreFlags(fs)
		fs.BoolVar(&apply, "apply", false, "create the keyspace and tables in the configured cluster")
	})
	if err != nil {
		return err
	}
	if err := c.Finish(); err != nil {
		return err
	}
	if err := c.Pyramid.Validate(); err != nil {
		return err
	}
	if err := c.Cassandra.Validate(); err != nil {
		return err
	}
	for _, stmt := range cassandra.Schema(c.Cassandra, c.Pyramid) {
		fmt.Fprintf(m.Stdout, "%s;\n\n", stmt)
	}
	if !apply {
		return nil
	}
	if err := cassandra.ApplySchema(ctx, c.Cassandra, c.Pyramid); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(m.Stderr, "schema applied to keyspace %s\n", c.Cassandra.Keyspace)
	return nil
}
