// Package auth owns the gateway's bearer tokens: the token file (YAML,
// one entry per token with its name, role and SHA-256), the roles read <
// write < admin, the lookup of a presented token, and re-reading the file
// without a restart. Only hashes are ever held; a presented token is
// hashed and compared to every known hash in constant time, so neither the
// file nor the process memory nor the timing of an answer gives a token
// away.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"gopkg.in/yaml.v3"
)

// Role is what a token may do. A higher role includes the lower ones.
type Role int

const (
	// Open marks routes that need no token at all.
	Open Role = iota
	// Read may use every GET of /v1, POST /v1/query and /grafana.
	Read
	// Write adds POST /v1/points.
	Write
	// Admin adds /v1/admin/....
	Admin
)

// String is the role's name in the token file.
func (r Role) String() string {
	switch r {
	case Open:
		return "open"
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads a role's name as the token file writes it.
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	case "admin":
		return Admin, nil
	}
	return Open, fmt.Errorf("role %q is not read, write or admin", s)
}

// Token is one entry of the token file.
type Token struct {
	Name string
	Role Role
	hash [sha256.Size]byte
}

// Set is the tokens of one reading of the file.
type Set struct {
	tokens []Token
}

// Len is the number of tokens.
func (s *Set) Len() int { return len(s.tokens) }

// Lookup finds the token whose hash is SHA-256(presented). Every known
// hash is compared, in constant time, whatever matches: the time taken
// depends on the number of tokens only.
func (s *Set) Lookup(presented string) (Token, bool) {
	h := sha256.Sum256([]byte(presented))
	found := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(h[:], s.tokens[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return s.tokens[found], true
}

type fileEntry struct {
	Name   string `yaml:"name"`
	Role   string `yaml:"role"`
	SHA256 string `yaml:"sha256"`
}

type file struct {
	Tokens []fileEntry `yaml:"tokens"`
}

// Parse reads a token file. Every entry needs a unique name, a role and
// the hex SHA-256 of its token; an error names each entry that lacks one.
func Parse(data []byte) (*Set, error) {
	var f file
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a token file (want tokens: [{name, role, sha256}]): %w", err)
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("the file lists no tokens")
	}
	var errs []error
	set := &Set{tokens: make([]Token, 0, len(f.Tokens))}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for i, e := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if e.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is missing", where))
		} else if names[e.Name] {
			errs = append(errs, fmt.Errorf("%s: name %q appears twice", where, e.Name))
		}
		names[e.Name] = true
		role, err := ParseRole(e.Role)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", where, e.Name, err))
		}
		var t Token
		raw, err := hex.DecodeString(e.SHA256)
		if err != nil || len(raw) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s (%s): sha256 must be 64 hex digits (gateway token prints one)", where, e.Name))
		} else {
			copy(t.hash[:], raw)
			if other, dup := hashes[t.hash]; dup {
				errs = append(errs, fmt.Errorf("%s (%s): the same token as %q", where, e.Name, other))
			}
			hashes[t.hash] = e.Name
		}
		t.Name, t.Role = e.Name, role
		set.tokens = append(set.tokens, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return set, nil
}

// Hash is the hex SHA-256 of a token, as the file holds it.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a random token: 32 bytes from the system's generator,
// URL-safe base64, prefixed so that a leaked one is recognisable.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on supported platforms
	return "tsg_" + base64.RawURLEncoding.EncodeToString(b)
}

// FileLine is the entry of the token file for a token.
func FileLine(name string, role Role, token string) string {
	return fmt.Sprintf("  - {name: %s, role: %s, sha256: %s}", name, role, Hash(token))
}

// Config is what `gateway serve` can be told about authentication.
type Config struct {
	// TokensFile is the token file; empty leaves every route open.
	TokensFile string
	// Metrics makes /metrics need the read role.
	Metrics bool
}

// RegisterFlags adds the authentication flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TokensFile, "auth-tokens", c.TokensFile, "YAML file of bearer tokens (name, role, sha256); empty: no authentication")
	fs.BoolVar(&c.Metrics, "auth-metrics", c.Metrics, "/metrics needs a read token too")
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Metrics && c.TokensFile == "" {
		return errors.New("--auth-metrics needs --auth-tokens")
	}
	return nil
}

// Tokens is the current token set of a file, replaced whole on Reload.
// A nil *Tokens means authentication is off.
type Tokens struct {
	path string
	cur  atomic.Pointer[Set]
}

// Load reads the file at path.
func Load(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Static serves a fixed set (tests, embedding).
func Static(s *Set) *Tokens {
	t := &Tokens{}
	t.cur.Store(s)
	return t
}

// Reload re-reads the file. On any error the tokens in force stay as they
// were: a half-written or mistyped file must not lock everyone out.
func (t *Tokens) Reload() error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return err
	}
	s, err := Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	t.cur.Store(s)
	return nil
}

// Current is the set in force.
func (t *Tokens) Current() *Set { return t.cur.Load() }
