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

// FuzzParse reads any YAML document as the config file and any text as
// an environment value. Parse never panics, and a successful parse leaves
// every flag at the value of its highest source: the environment, else the
// file's key (as flatten reads it), else the default.
func FuzzParse(f *testing.F) {
	for _, c := range [][2]string{
		{"addr: 0.0.0.0:9000\nread-parallelism: 8\ncassandra-hosts: [a:9042, b:9042]\nraw:\n  retention: 3d\n", ""},
		{"read-parallelism: 8\n", "4"},
		{"raw: {retention: 1w}\naddr: ~\n", "x"},
		{"adr: x\n", ""}, {"- a\n- b\n", ""}, {"addr: [1, [2]]\n", ""}, {"a: &x 1\nb: *x\n", ""}, {"", ""}, {"config: other.yaml\n", ""},
		{"read-parallelism: 1e3\n", ""}, {"addr: {a: 1}\n", ""}, {"? [a]\n: 1\n", ""},
	} {
		f.Add([]byte(c[0]), c[1])
	}
	path := filepath.Join(f.TempDir(), "gateway.yaml")
	f.Fuzz(func(t *testing.T, doc []byte, envPar string) {
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"GATEWAY_CONFIG": path}
		if envPar != "" {
			env["GATEWAY_READ_PARALLELISM"] = envPar
		}
		fs, _, _, _, _, _ := newFS()
		err := Parse(fs, nil, "GATEWAY_", "config", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		values, ferr := flatten(doc)
		if ferr != nil {
			t.Fatalf("%q: Parse succeeded where flatten fails: %v", doc, ferr)
		}
		want, _, _, _, _, _ := newFS()
		want.VisitAll(func(fl *flag.Flag) {
			if fl.Name == "config" {
				_ = want.Set("config", path)
				return
			}
			if v, ok := env[EnvName("GATEWAY_", fl.Name)]; ok {
				_ = want.Set(fl.Name, v)
			} else if v, ok := values[fl.Name]; ok {
				_ = want.Set(fl.Name, v)
			}
		})
		for k := range values {
			if fs.Lookup(k) == nil || k == "config" {
				t.Fatalf("%q: unknown key %q accepted", doc, k)
			}
		}
		want.VisitAll(func(fl *flag.Flag) {
			if got := fs.Lookup(fl.Name).Value.String(); got != fl.Value.String() {
				t.Fatalf("%q, env %q: --%s = %q, want %q", doc, envPar, fl.Name, got, fl.Value.String())
			}
		})
	})
}
