package cursor

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestListCursorRoundTrip(t *testing.T) {
	for _, id := range []string{"a", "sensor-1", "A.b:c_d-9", strings.Repeat("x", 200)} {
		token := EncodeList(id)
		got, err := DecodeList(token)
		if err != nil || got != id {
			t.Fatalf("DecodeList(EncodeList(%q)) = %q, %v", id, got, err)
		}
	}
}

func TestListCursorRefusesAnythingElse(t *testing.T) {
	token := EncodeList("sensor-2")
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	flip := func(i int) string {
		x := append([]byte(nil), raw...)
		x[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(x)
	}
	cases := []struct {
		name, token string
		want        error
	}{
		{"garbage", "garbage", ErrCursorMalformed},
		{"a plain series id", "sensor-2", ErrCursorMalformed},
		{"empty", "", ErrCursorMalformed},
		{"id altered", flip(3), ErrCursorMalformed},
		{"check altered", flip(len(raw) - 1), ErrCursorMalformed},
		{"version altered", flip(0), ErrCursorMalformed},
		{"other version", otherVersion("sensor-2"), ErrCursorVersion},
		{"truncated", token[:len(token)-2], ErrCursorMalformed},
		{"extended", token + "AA", ErrCursorMalformed},
		{"line breaks inside", token[:4] + "\r\n" + token[4:], ErrCursorMalformed},
		{"padded", token + "=", ErrCursorMalformed},
		{"too short", base64.RawURLEncoding.EncodeToString([]byte{listCursorVersion, 1, 2, 3, 4}), ErrCursorMalformed},
		{"huge", strings.Repeat("A", 1<<16), ErrCursorMalformed},
	}
	for _, c := range cases {
		if id, err := DecodeList(c.token); !errors.Is(err, c.want) {
			t.Errorf("%s: %q, %v; want %v", c.name, id, err, c.want)
		}
	}
}

// otherVersion is the cursor of id as a gateway with another listing
// cursor version would issue it.
func otherVersion(id string) string {
	body := append([]byte{listCursorVersion + 1}, id...)
	return base64.RawURLEncoding.EncodeToString(append(body, listCheck(body)...))
}

// Any token DecodeList accepts is exactly the encoding of the id it
// returns.
func FuzzListCursorDecode(f *testing.F) {
	f.Add(EncodeList("sensor-1"))
	f.Add(EncodeList(strings.Repeat("x", 200)))
	f.Add("garbage")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := DecodeList(token)
		if err != nil {
			if !errors.Is(err, ErrCursorMalformed) && !errors.Is(err, ErrCursorVersion) {
				t.Fatalf("DecodeList(%q): unexpected error %v", token, err)
			}
			return
		}
		if EncodeList(id) != token {
			t.Fatalf("accepted %q for %q, which encodes as %q", token, id, EncodeList(id))
		}
	})
}

// FuzzListCursorEdited edits a valid listing cursor and checks that only
// the unedited token is accepted, and that it gives back its id.
func FuzzListCursorEdited(f *testing.F) {
	f.Add("sensor-1", uint8(4), "\r\n", uint8(0))
	f.Add("a", uint8(255), "=", uint8(0))
	f.Add("room.a.temp", uint8(2), "", uint8(1))
	f.Fuzz(func(t *testing.T, id string, at uint8, insert string, remove uint8) {
		if len(id) > maxListCursorID {
			return
		}
		token := EncodeList(id)
		i := int(at) % (len(token) + 1)
		j := min(i+int(remove), len(token))
		edited := token[:i] + insert + token[j:]
		got, err := DecodeList(edited)
		if err != nil {
			if edited == token && id != "" {
				t.Fatalf("the cursor of %q refused: %v", id, err)
			}
			return
		}
		if edited != token || got != id {
			t.Fatalf("edited token %q (from %q for %q) accepted as %q", edited, token, id, got)
		}
	})
}
