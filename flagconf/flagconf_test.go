package flagconf

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newFS() (*flag.FlagSet, *string, *string, *int, *string, *string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := fs.String("config", "", "")
	addr := fs.String("addr", "127.0.0.1:8080", "")
	par := fs.Int("read-parallelism", 16, "")
	hosts := fs.String("cassandra-hosts", "127.0.0.1:9042", "")
	ret := fs.String("raw-retention", "7d", "")
	return fs, cfg, addr, par, hosts, ret
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	yaml := "addr: 0.0.0.0:9000\nread-parallelism: 8\ncassandra-hosts: [a:9042, b:9042]\nraw:\n  retention: 3d\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GATEWAY_READ_PARALLELISM": "4", "GATEWAY_CONFIG": path}
	fs, _, addr, par, hosts, ret := newFS()
	err := Parse(fs, []string{"--addr", "127.0.0.1:1"}, "GATEWAY_", "config", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:1" {
		t.Errorf("addr = %s: the command line must win", *addr)
	}
	if *par != 4 {
		t.Errorf("read-parallelism = %d: the environment must win over the file", *par)
	}
	if *hosts != "a:9042,b:9042" {
		t.Errorf("cassandra-hosts = %s: a YAML list becomes a comma list", *hosts)
	}
	if *ret != "3d" {
		t.Errorf("raw-retention = %s: nested keys join with dashes", *ret)
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	_ = os.WriteFile(path, []byte("adr: x\n"), 0o600)
	fs, _, _, _, _, _ := newFS()
	err := Parse(fs, []string{"--config", path}, "GATEWAY_", "config", func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "adr") {
		t.Fatalf("err = %v, want it to name the unknown key", err)
	}
}

func TestBadEnvValueIsAnError(t *testing.T) {
	fs, _, _, _, _, _ := newFS()
	err := Parse(fs, nil, "GATEWAY_", "config", func(k string) (string, bool) {
		if k == "GATEWAY_READ_PARALLELISM" {
			return "many", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "GATEWAY_READ_PARALLELISM") {
		t.Fatalf("err = %v", err)
	}
}
