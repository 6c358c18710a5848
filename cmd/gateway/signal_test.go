package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the program itself, main and its signal handling
// included, when a test starts the test binary with runMainEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const runMainEnv = "TSGATE_TEST_RUN_MAIN"

// process is `gateway ARGS` running as a process of its own.
type process struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
	err    error
}

func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(os.Args[0], args...), out: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v\n%s", sig, err, p.out.String())
	}
}

// waitExit waits up to limit for the process to end and returns its error.
func (p *process) waitExit(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		t.Fatalf("the process did not exit within %v:\n%s", limit, p.out.String())
		return nil
	}
}

// Without a token file SIGHUP has nothing to reload: the gateway says so
// and goes on serving; SIGTERM then stops it with status 0.
func TestSIGHUPWithoutTokens(t *testing.T) {
	addr := freeAddr(t)
	p := startProcess(t, "serve", "--addr", addr, "--data-dir", t.TempDir(), "--rollup-interval", "0")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if status, _, err := fresh("GET", "http://"+addr+"/healthz", ""); err == nil && status == 200 {
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("serve exited: %v\n%s", p.err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer /healthz:\n%s", p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 2 {
		p.signal(t, syscall.SIGHUP)
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(p.out.String(), "nothing to reload") <= i {
			select {
			case <-p.exited:
				t.Fatalf("SIGHUP ended the process: %v\n%s", p.err, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("SIGHUP was not answered in the log:\n%s", p.out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if status, body, err := fresh("GET", "http://"+addr+"/healthz", ""); err != nil || status != 200 {
		t.Fatalf("/healthz after SIGHUP: %d %s %v\n%s", status, body, err, p.out.String())
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.waitExit(t, 10*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.out.String())
	}
}

// SIGTERM and SIGINT stop the process while it waits for a store that
// does not answer, promptly and with status 0.
func TestSignalWhileWaitingForTheStore(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		addr, nowhere := freeAddr(t), freeAddr(t)
		p := startProcess(t, "serve", "--addr", addr, "--store", "cassandra", "--cassandra-hosts", nowhere,
			"--cassandra-reconnect-interval", "100ms")
		deadline := time.Now().Add(30 * time.Second)
		for {
			status, _, err := fresh("GET", "http://"+addr+"/readyz", "")
			if err == nil && status == 503 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: /readyz did not answer 503: %d %v\n%s", sig, status, err, p.out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.signal(t, sig)
		if err := p.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("%v while waiting for the store: %v\n%s", sig, err, p.out.String())
		}
	}
}
