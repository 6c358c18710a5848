package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is one process the benchmark runs: the gateway, VictoriaMetrics
// or Prometheus, on a loopback port, with its data in the scratch
// directory. It keeps its data over restarts (cold reads are the first
// after a restart).
type server struct {
	name  string
	bin   string
	args  []string
	dir   string // working directory
	log   string
	url   string // http://127.0.0.1:port
	ready string // path that answers 200 once the server serves

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// running are the servers started and not yet stopped: stopAll stops
// them, also when the benchmark fails or is interrupted.
var running sync.Map // *server → struct{}

// pidFile lists the process ids the benchmark started, so that the
// script around it can stop them should this process be killed outright.
var pidFile string

func (s *server) start(ctx context.Context, timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("%s already running", s.name)
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: an interrupt of the terminal does not reach
	// it, and stop reaches its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	running.Store(s, struct{}{})
	recordPid(cmd.Process.Pid)
	go func(done chan struct{}) {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}(s.done)

	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited during startup (log %s)", s.name, s.log)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := client.Get(s.url + s.ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s (log %s)", s.name, timeout, s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pid is the server's process id, 0 when it is not running.
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// stop sends SIGTERM to the server's process group and SIGKILL after 30 s.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
	running.Delete(s)
}

func (s *server) restart(ctx context.Context) error {
	s.stop()
	return s.start(ctx, 2*time.Minute)
}

// stopAll stops every server still running.
func stopAll() {
	running.Range(func(k, _ any) bool {
		k.(*server).stop()
		return true
	})
}

func recordPid(pid int) {
	if pidFile == "" {
		return
	}
	f, err := os.OpenFile(pidFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintln(f, pid)
	_ = f.Close()
}

// peakRSS is the process' peak resident set (VmHWM) in bytes.
func peakRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// diskBytes is what the files under dir take on disk (as du counts).
func diskBytes(dir string) (int64, error) {
	n, _, err := diskUse(dir)
	return n, err
}

// diskUse returns the bytes the files under dir take on disk, and of them
// those of write-ahead logs (Pebble's *.log files, Prometheus' wal
// directory): space a store reserves or keeps whatever the data it holds
// (Pebble preallocates 110 % of its memtable for each log).
func diskUse(dir string) (total, wal int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		n := fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n = st.Blocks * 512
		}
		total += n
		if strings.HasSuffix(d.Name(), ".log") || filepath.Base(filepath.Dir(path)) == "wal" {
			wal += n
		}
		return nil
	})
	return total, wal, err
}

// runTool runs a loader to completion and returns its wall time and its
// peak resident set.
func runTool(ctx context.Context, log string, name string, args ...string) (time.Duration, int64, error) {
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	recordPid(cmd.Process.Pid)
	err = cmd.Wait()
	d := time.Since(t0)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10
	}
	if err != nil {
		return d, rss, fmt.Errorf("%s: %w (log %s)", filepath.Base(name), err, log)
	}
	return d, rss, nil
}
