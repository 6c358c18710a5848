//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tsgate/tsgate/testkit/storetest"
	"github.com/tsgate/tsgate/tiers"
	"github.com/tsgate/tsgate/tiers/cassandra"
)

// sealCrashKeyspaceEnv names, in a child process of TestSealingSurvivesKill,
// the keyspace and data center of the store it writes and seals.
const sealCrashKeyspaceEnv = "TSGATE_TEST_SEAL_CRASH_KEYSPACE"

// sealCrashConfig is the store of the crash test: rows deleted in the seal
// itself, so that a kill between the chunks' write and the rows' delete
// is among the moments tried.
func sealCrashConfig(ks, dc string) cassandra.Config {
	cfg := cassandra.DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.LocalDC = hosts, ks, dc
	cfg.Consistency = "LOCAL_QUORUM"
	cfg.Replication = dc + ":1"
	cfg.SealedRowsGrace = 0
	return cfg
}

// sealCrashChild opens the store for storetest.SealCrashChild.
func sealCrashChild(ksAndDC string) {
	ks, dc, _ := strings.Cut(ksAndDC, " ")
	s, err := cassandra.Open(context.Background(), sealCrashConfig(ks, dc), tiers.DefaultPyramid(), storeLogger())
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	storetest.SealCrashChild(s)
}

// A gateway killed with SIGKILL while it writes to Cassandra and seals
// loses nothing acknowledged (storetest.RunSealCrash).
func TestSealingSurvivesKill(t *testing.T) {
	session := newSession(t)
	ks := newKeyspace(t, session)
	var dc string
	if err := session.Query("SELECT data_center FROM system.local").ScanContext(testContext(t), &dc); err != nil {
		t.Fatal(err)
	}
	cfg := sealCrashConfig(ks, dc)
	if err := cassandra.ApplySchema(testContext(t), cfg, tiers.DefaultPyramid()); err != nil {
		t.Fatal(err)
	}
	storetest.RunSealCrash(t,
		func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), sealCrashKeyspaceEnv+"="+ks+" "+dc)
			return cmd
		},
		func() storetest.CrashStore {
			s, err := cassandra.Open(testContext(t), cfg, tiers.DefaultPyramid(), storeLogger())
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
}
