package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAndLookup(t *testing.T) {
	tokens := map[string]string{"grafana": NewToken(), "loader": NewToken(), "ops": NewToken()}
	roles := map[string]Role{"grafana": Read, "loader": Write, "ops": Admin}
	var b strings.Builder
	b.WriteString("tokens:\n")
	for _, name := range []string{"grafana", "loader", "ops"} {
		b.WriteString(FileLine(name, roles[name], tokens[name]) + "\n")
	}
	set, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 3 {
		t.Fatalf("%d tokens, want 3", set.Len())
	}
	for name, tok := range tokens {
		got, ok := set.Lookup(tok)
		if !ok || got.Name != name || got.Role != roles[name] {
			t.Errorf("Lookup(%s's token) = %+v %v", name, got, ok)
		}
		// A prefix, a suffix, a changed character, the hash itself: unknown.
		for _, wrong := range []string{tok[:len(tok)-1], tok + "x", "x" + tok[1:], Hash(tok), ""} {
			if got, ok := set.Lookup(wrong); ok {
				t.Errorf("Lookup(%q) found %+v", wrong, got)
			}
		}
	}
}

func TestHashIsSHA256(t *testing.T) {
	// The example of the contract: sha256("test").
	if got := Hash("test"); got != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Errorf("Hash(test) = %s", got)
	}
}

func TestRolesAreOrdered(t *testing.T) {
	if !(Open < Read && Read < Write && Write < Admin) {
		t.Error("roles out of order")
	}
	for _, r := range []Role{Read, Write, Admin} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%s) = %v %v", r, got, err)
		}
	}
	if _, err := ParseRole("open"); err == nil {
		t.Error("a token cannot have the open role")
	}
}

func TestParseRejects(t *testing.T) {
	h := Hash("a")
	cases := map[string]struct{ file, want string }{
		"empty":       {"", "not a token file"},
		"no tokens":   {"tokens: []\n", "no tokens"},
		"no name":     {"tokens:\n  - {role: read, sha256: " + h + "}\n", "tokens[0]: name is missing"},
		"bad role":    {"tokens:\n  - {name: a, role: root, sha256: " + h + "}\n", `role "root"`},
		"short hash":  {"tokens:\n  - {name: a, role: read, sha256: abc}\n", "64 hex digits"},
		"clear token": {"tokens:\n  - {name: a, role: read, token: secret}\n", "not a token file"},
		"dup name":    {"tokens:\n  - {name: a, role: read, sha256: " + h + "}\n  - {name: a, role: read, sha256: " + Hash("b") + "}\n", "appears twice"},
		"dup token":   {"tokens:\n  - {name: a, role: read, sha256: " + h + "}\n  - {name: b, role: admin, sha256: " + h + "}\n", `same token as "a"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// A bad file on reload keeps the tokens in force; a good one replaces them.
func TestReloadKeepsTokensOnBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	a, b := NewToken(), NewToken()
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n" + FileLine("a", Read, a) + "\n")
	toks, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	write("tokens:\n  - {name: b, role: superuser")
	if err := toks.Reload(); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if _, ok := toks.Current().Lookup(a); !ok {
		t.Fatal("a broken file dropped the tokens in force")
	}
	write("tokens:\n" + FileLine("b", Admin, b) + "\n")
	if err := toks.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Current().Lookup(a); ok {
		t.Error("a rotated-out token still works")
	}
	if got, ok := toks.Current().Lookup(b); !ok || got.Role != Admin {
		t.Errorf("the new token: %+v %v", got, ok)
	}
}

func TestNewTokensDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := NewToken()
		if seen[tok] || len(tok) < 40 {
			t.Fatalf("token %q repeated or short", tok)
		}
		seen[tok] = true
	}
}

// Any file either parses into tokens that each look themselves up by
// hash, or is refused; it never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte("tokens:\n" + FileLine("a", Read, "x") + "\n"))
	f.Add([]byte("tokens:\n  - {name: a, role: admin, sha256: " + Hash("y") + "}\n  - {name: b, role: write, sha256: " + Hash("z") + "}\n"))
	f.Add([]byte("tokens: [{name: a}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse(data)
		if err != nil {
			return
		}
		if set.Len() == 0 {
			t.Fatal("a set without tokens parsed")
		}
		for _, tok := range set.tokens {
			if tok.Name == "" || tok.Role < Read || tok.Role > Admin {
				t.Fatalf("parsed a bad entry %+v", tok)
			}
		}
	})
}
