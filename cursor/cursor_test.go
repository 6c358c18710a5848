package cursor

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
		{"LF at the end", token + "\n", b, ErrCursorMalformed},
		{"CR inside", token[:40] + "\r" + token[40:], b, ErrCursorMalformed},
		{"padded", token + "==", b, ErrCursorMalformed},
		{"space inside", token[:20] + " " + token[20:], b, ErrCursorMalformed},
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
	token := s.Encode(Cursor{Binding: b, From: 1, To: 2, Position: 1})
	f.Add(token)
	// Spellings a lenient base64 decoder reads as the same bytes.
	f.Add(token[:20] + "\r\n\n\r" + token[20:])
	f.Add(token + "\n")
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

// FuzzCursorEdited edits a valid token — bytes inserted at one place,
// some removed — and checks that the edit is accepted only when it
// leaves the token as it was: a lenient decoder reads some edited
// spellings (line breaks, padding) as the same bytes.
func FuzzCursorEdited(f *testing.F) {
	s := testSigner(f)
	b := Bind("x")
	f.Add(int64(1000), int64(9000), int64(4321), "minute", int64(60000), int64(60000), uint8(20), "\r\n\n\r", uint8(0))
	f.Add(int64(0), int64(1), int64(0), "raw", int64(0), int64(0), uint8(255), "\n", uint8(0))
	f.Add(int64(-5), int64(5), int64(5), "hour", int64(1), int64(1), uint8(3), "", uint8(2))
	f.Fuzz(func(t *testing.T, from, to, pos int64, tierName string, tierStep, step int64, at uint8, insert string, remove uint8) {
		if len(tierName) > maxNameLen {
			return
		}
		c := Cursor{Binding: b, From: from, To: to, Position: pos, TierName: tierName, TierStep: tierStep, Step: step}
		token := s.Encode(c)
		i := int(at) % (len(token) + 1)
		j := min(i+int(remove), len(token))
		edited := token[:i] + insert + token[j:]
		got, err := s.Decode(edited, b)
		if err != nil {
			return
		}
		if edited != token {
			t.Fatalf("edited token %q (from %q) accepted", edited, token)
		}
		if got != c {
			t.Fatalf("Decode(Encode(%+v)) = %+v", c, got)
		}
	})
}
