// Command gateway is the time-series query gateway for Apache Cassandra.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Printf("gateway %s\n", version)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: gateway version")
	os.Exit(2)
}
