package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// Cursor is the state a next_cursor carries: which request it belongs to,
// the absolute range and plan of that request's first page (so relative
// times and tier choice cannot drift between pages), and where to resume.
type Cursor struct {
	Binding Binding
	// From and To are the request's range as resolved for its first page.
	From, To int64
	// Position is where the next page starts: ascending, every point before
	// it was delivered; descending, every point at or after it.
	Position int64
	// TierName and TierStep name the tier the first page chose, so that a
	// cursor of a pyramid that no longer has it is refused rather than
	// misread; Step is the answer's window (0 for raw points).
	TierName string
	TierStep int64
	Step     int64
}

// Binding is a digest of a normalized request: the parameters that define
// its answer (series, range as given, resolution, max_points, agg, order).
// A cursor is only accepted with the request it was issued for.
type Binding [16]byte

// Bind digests the normalized parameters of a request.
func Bind(parts ...string) Binding {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		// Length-prefixed, so ("ab","c") and ("a","bc") differ.
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var b Binding
	copy(b[:], h.Sum(nil))
	return b
}

// cursorVersion is the first byte of every cursor; bump it when the layout
// changes so that old cursors are refused with a clear message.
const cursorVersion = 2

const (
	// fixedLen is the payload without the tier name: version, binding,
	// from, to, position, step, tier step and the name's length.
	fixedLen = 1 + 16 + 8 + 8 + 8 + 8 + 8 + 1
	macLen   = 16
	// maxNameLen bounds a tier name in a cursor.
	maxNameLen = 64
	// maxTokenLen is the longest token Encode produces.
	maxTokenLen = (fixedLen + maxNameLen + macLen + 2) / 3 * 4
)

// Cursor errors; each is a client error (400).
var (
	ErrCursorMalformed = errors.New("cursor is not a cursor this gateway issued (malformed or truncated)")
	ErrCursorForged    = errors.New("cursor signature does not match: it was altered or issued by another deployment")
	ErrCursorVersion   = errors.New("cursor was issued by another gateway version; start the query again without cursor")
	ErrCursorMismatch  = errors.New("cursor belongs to a different request; repeat the parameters of the request that returned it")
)

// Signer issues and checks cursors with an HMAC-SHA256 key.
type Signer struct {
	key []byte
}

// NewSigner returns a signer; the key should be 32 random bytes shared by
// every instance of a deployment.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 16 {
		return nil, errors.New("cursor key must be at least 16 bytes")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Encode returns the opaque, URL-safe token of c.
func (s *Signer) Encode(c Cursor) string {
	name := c.TierName
	if len(name) > maxNameLen {
		name = name[:maxNameLen] // tier names are at most 32 bytes; never reached
	}
	buf := make([]byte, 0, fixedLen+len(name)+macLen)
	buf = append(buf, cursorVersion)
	buf = append(buf, c.Binding[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.From))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.To))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.Position))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.Step))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.TierStep))
	buf = append(buf, byte(len(name)))
	buf = append(buf, name...)
	buf = append(buf, s.mac(buf)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// Decode checks a token and returns its cursor. It fails, with one of the
// cursor errors, for anything malformed, forged, of another version, or
// issued for a request other than binding. Only the exact token Encode
// wrote is accepted: base64 decoders skip line breaks and tolerate other
// variations, so the token must consist of the URL-safe alphabet alone.
func (s *Signer) Decode(token string, binding Binding) (Cursor, error) {
	if len(token) > maxTokenLen {
		return Cursor{}, ErrCursorMalformed
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return Cursor{}, ErrCursorMalformed
		}
	}
	buf, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(buf) == 0 {
		return Cursor{}, ErrCursorMalformed
	}
	if buf[0] != cursorVersion {
		return Cursor{}, ErrCursorVersion
	}
	if len(buf) < fixedLen+macLen {
		return Cursor{}, ErrCursorMalformed
	}
	nameLen := int(buf[fixedLen-1])
	if len(buf) != fixedLen+nameLen+macLen {
		return Cursor{}, ErrCursorMalformed
	}
	payload, mac := buf[:fixedLen+nameLen], buf[fixedLen+nameLen:]
	if !hmac.Equal(mac, s.mac(payload)) {
		return Cursor{}, ErrCursorForged
	}
	var c Cursor
	copy(c.Binding[:], payload[1:17])
	c.From = int64(binary.BigEndian.Uint64(payload[17:25]))
	c.To = int64(binary.BigEndian.Uint64(payload[25:33]))
	c.Position = int64(binary.BigEndian.Uint64(payload[33:41]))
	c.Step = int64(binary.BigEndian.Uint64(payload[41:49]))
	c.TierStep = int64(binary.BigEndian.Uint64(payload[49:57]))
	c.TierName = string(payload[fixedLen:])
	if c.Binding != binding {
		return Cursor{}, ErrCursorMismatch
	}
	if c.From >= c.To || c.Step < 0 || c.TierStep < 0 || c.Position < c.From-c.Step || c.Position > c.To+c.Step {
		// Only a leaked key could sign this; refuse it all the same.
		return Cursor{}, fmt.Errorf("%w: inconsistent position", ErrCursorMalformed)
	}
	return c, nil
}

func (s *Signer) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}
