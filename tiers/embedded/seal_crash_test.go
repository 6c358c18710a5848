package embedded

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/tsgate/tsgate/testkit/storetest"
)

// sealCrashChild holds the store in dir for storetest.SealCrashChild.
func sealCrashChild(dir string) {
	s, err := Open(dir, Options{SweepInterval: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	storetest.SealCrashChild(s)
}

// A process killed with SIGKILL while it writes and seals loses nothing
// acknowledged (storetest.RunSealCrash).
func TestSealingSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	storetest.RunSealCrash(t,
		func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "TSGATE_TEST_SEAL_CRASH_DIR="+dir)
			return cmd
		},
		func() storetest.CrashStore {
			s, err := Open(dir, Options{SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
}
