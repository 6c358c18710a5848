package cassandra

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrefixEnd(t *testing.T) {
	cases := []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"abc", "abd", true},
		{"a.", "a/", true},
		{"é", "ê", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"x\uD7FF", "x\uE000", true},
		{"\u00ff", "\u0100", true},
	}
	for _, c := range cases {
		end, ok := prefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, ok, c.end, c.ok)
		}
	}
	// The bound is above every string with the prefix and below every
	// larger string without it.
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []rune{'a', 'b', 0x7f, 0xff, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, 0x10ffff}
	word := func(n int) string {
		var s []rune
		for range n {
			s = append(s, alphabet[r.IntN(len(alphabet))])
		}
		return string(s)
	}
	for range 20000 {
		prefix, other := word(1+r.IntN(3)), word(r.IntN(5))
		end, ok := prefixEnd(prefix)
		withPrefix := prefix + other
		if ok && !(withPrefix < end) {
			t.Fatalf("prefixEnd(%q) = %q is not above %q", prefix, end, withPrefix)
		}
		if !ok || len(other) < len(prefix) || other[:len(prefix)] == prefix {
			continue
		}
		if other > prefix && other < end {
			t.Fatalf("%q lies between prefix %q and its end %q", other, prefix, end)
		}
	}
}

// FuzzPrefixEnd: for a UTF-8 prefix the bound is valid UTF-8, above every
// string with the prefix, and not above any larger string without it.
func FuzzPrefixEnd(f *testing.F) {
	for _, c := range [][2]string{{"abc", "x"}, {"a\U0010FFFF", "b"}, {"x\uD7FF", ""}, {"\U0010FFFF", "a"}, {"", "a"}, {"s-", "s."}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, prefix, other string) {
		end, ok := prefixEnd(prefix)
		if !ok {
			if end != "" {
				t.Fatalf("prefixEnd(%q) = %q, false", prefix, end)
			}
			if strings.TrimRight(prefix, "\U0010FFFF") != "" && utf8.ValidString(prefix) {
				t.Fatalf("prefixEnd(%q) found no bound", prefix)
			}
			return
		}
		if !(prefix+other < end) {
			t.Fatalf("prefixEnd(%q) = %q is not above %q", prefix, end, prefix+other)
		}
		if !utf8.ValidString(prefix) || !utf8.ValidString(other) {
			return
		}
		if !utf8.ValidString(end) {
			t.Fatalf("prefixEnd(%q) = %q is not UTF-8", prefix, end)
		}
		if !strings.HasPrefix(other, prefix) && other > prefix && other < end {
			t.Fatalf("%q lies between prefix %q and its end %q", other, prefix, end)
		}
	})
}
