package partial

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func testSigner(t testing.TB) *Signer {
	s, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCursorRoundTrip(t *testing.T) {
	s := testSigner(t)
	b := Bind("sensor-1", "now-6h", "now", "raw", "", "avg", "asc")
	c := Cursor{Binding: b, From: 1000, To: 9000, Position: 4321, TierName: "hour", TierStep: 3600000, Step: 7200000}
	got, err := s.Decode(s.Encode(c), b)
	if err != nil || got != c {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", c, got, err)
	}
}

func TestCursorTampering(t *testing.T) {
	s := testSigner(t)
	b := Bind("sensor-1", "0", "9000", "raw")
	token := s.Encode(Cursor{Binding: b, From: 0, To: 9000, Position: 500, TierName: "raw"})
	raw, _ := base64.RawURLEncoding.DecodeString(token)

	flip := func(i int) string {
		x := append([]byte(nil), raw...)
		x[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(x)
	}
	other, _ := NewSigner([]byte("another deployment's key, 32 by."))
	oldVersion := append([]byte{0}, raw[1:]...)
	cases := []struct {
		name  string
		token string
		bind  Binding
		want  error
	}{
		{"position altered", flip(40), b, ErrCursorForged},
		{"tier name altered", flip(len(raw) - macLen - 1), b, ErrCursorForged},
		{"binding altered", flip(3), b, ErrCursorForged},
		{"signature altered", flip(len(raw) - 1), b, ErrCursorForged},
		{"truncated", token[:len(token)-4], b, ErrCursorMalformed},
		{"extended", token + "AAAA", b, ErrCursorMalformed},
		{"not base64", "!!!" + token, b, ErrCursorMalformed},
		{"empty", "", b, ErrCursorMalformed},
		{"other request", token, Bind("sensor-2", "0", "9000", "raw"), ErrCursorMismatch},
		{"other key", other.Encode(Cursor{Binding: b, From: 0, To: 9000, Position: 500}), b, ErrCursorForged},
		{"older version", base64.RawURLEncoding.EncodeToString(oldVersion), b, ErrCursorVersion},
		{"huge", string(make([]byte, 1<<20)), b, ErrCursorMalformed},
		{"line breaks inserted", token[:20] + "\r\n\n\r" + token[20:], b, ErrCursorMalformed},
		{"padded", token + "==", b, ErrCursorMalformed},
		{"standard alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(token) + "+", b, ErrCursorMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Decode(c.token, c.bind); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestBindIsUnambiguous(t *testing.T) {
	if Bind("ab", "c") == Bind("a", "bc") {
		t.Fatal("length prefixes missing")
	}
}

// Decoding arbitrary input never panics and accepts only what the signer
// produced.
func FuzzCursorDecode(f *testing.F) {
	s := testSigner(f)
	b := Bind("x")
	f.Add(s.Encode(Cursor{Binding: b, From: 1, To: 2, Position: 1}))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Decode(token, b)
		if err != nil {
			return
		}
		if s.Encode(c) != token {
			t.Fatalf("accepted %q, which re-encodes differently", token)
		}
	})
}
