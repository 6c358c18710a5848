package ingest

import "encoding/json"

// decodeJSONFast decodes a body of the plain form {"points": [{"series":
// "...", "t": ..., "v": ...}, ...]}: any whitespace and member order, each
// of the three members exactly once, strings of printable ASCII without
// escapes, t a number or such a string, v a number. It runs every point
// through checkPoint, as decodeJSONStream does, and reports ok only when
// the body has that form and every point is valid; it then returns exactly
// the points decodeJSONStream would. Anything else — other JSON that
// encoding/json might still accept, invalid JSON, invalid points — is left
// to decodeJSONStream, so that the answer and its error report are always
// encoding/json's.
func decodeJSONFast(body []byte, now int64) ([]Point, bool) {
	s := scanner{b: body}
	if !s.next('{') {
		return nil, false
	}
	if key, ok := s.str(); !ok || string(key) != "points" {
		return nil, false
	}
	if !s.next(':') || !s.next('[') {
		return nil, false
	}
	// About 50 bytes per point in practice; a guess, not a bound.
	points := make([]Point, 0, len(body)/48+1)
	verr := &ValidationError{}
	for i := 0; ; i++ {
		if !s.next('{') {
			return nil, false // also an empty array: the stream reports it
		}
		rp, ok := s.point()
		if !ok {
			return nil, false
		}
		p, ok := checkPoint(rp, i, now, verr)
		if !ok {
			return nil, false
		}
		points = append(points, p)
		if s.next(',') {
			continue
		}
		if s.next(']') {
			break
		}
		return nil, false
	}
	if !s.next('}') {
		return nil, false
	}
	s.skipSpace()
	return points, s.i == len(s.b)
}

// point reads the members of one point object after its '{', through its
// '}'.
func (s *scanner) point() (rawPoint, bool) {
	var rp rawPoint
	for {
		key, ok := s.str()
		if !ok || !s.next(':') {
			return rp, false
		}
		switch string(key) {
		case "series":
			b, ok := s.str()
			if !ok || rp.Series != nil {
				return rp, false
			}
			if string(b) != s.id {
				s.id = s.intern(b)
			}
			rp.Series = &s.id
		case "t":
			if rp.T != nil {
				return rp, false
			}
			s.skipSpace()
			start := s.i
			if s.i < len(s.b) && s.b[s.i] == '"' {
				if _, ok := s.str(); !ok {
					return rp, false
				}
			} else if !s.number() {
				return rp, false
			}
			rp.T = json.RawMessage(s.b[start:s.i])
		case "v":
			if rp.V != nil {
				return rp, false
			}
			s.skipSpace()
			start := s.i
			if !s.number() {
				return rp, false
			}
			s.v = json.RawMessage(s.b[start:s.i])
			rp.V = &s.v
		default:
			return rp, false
		}
		if s.next(',') {
			continue
		}
		if s.next('}') {
			break
		}
		return rp, false
	}
	return rp, rp.Series != nil && rp.T != nil && rp.V != nil
}

// ndjsonLineFast decodes one NDJSON line of the plain form, a single
// point object, and checks it; ok is false for any other line, which the
// caller leaves to encoding/json so that its errors are reported the same.
// s is the caller's, reused from line to line.
func ndjsonLineFast(s *scanner, line []byte, i int, now int64) (Point, bool) {
	s.b, s.i = line, 0
	if !s.next('{') {
		return Point{}, false
	}
	rp, ok := s.point()
	if !ok {
		return Point{}, false
	}
	s.skipSpace()
	if s.i != len(s.b) {
		return Point{}, false
	}
	verr := &ValidationError{}
	return checkPoint(rp, i, now, verr)
}

// scanner reads the tokens of the plain form.
type scanner struct {
	b []byte
	i int
	// The point being read points its members here rather than at fresh
	// variables, which would each be allocated: checkPoint copies them out
	// before the next point is read. id is also the last series id read,
	// reused while points repeat it.
	id string
	v  json.RawMessage
	// names interns series ids, so that a batch interleaving a few series
	// allocates each id once rather than at every change of series.
	names map[string]string
}

// maxInterned bounds the ids a scanner interns: beyond it, a batch of
// that many distinct series allocates each id anyway.
const maxInterned = 4096

// intern returns b as a string, the same string for the same bytes while
// fewer than maxInterned ids were seen.
func (s *scanner) intern(b []byte) string {
	if id, ok := s.names[string(b)]; ok {
		return id
	}
	id := string(b)
	if s.names == nil {
		s.names = map[string]string{}
	}
	if len(s.names) < maxInterned {
		s.names[id] = id
	}
	return id
}

// skipSpace skips JSON whitespace.
func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c, after whitespace, if it comes next.
func (s *scanner) next(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str consumes a string of printable ASCII without escapes — one that
// encoding/json decodes to its bytes as they stand — and returns its
// contents.
func (s *scanner) str() ([]byte, bool) {
	s.skipSpace()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			out := s.b[s.i+1 : j]
			s.i = j + 1
			return out, true
		case c < 0x20 || c == '\\' || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

// number consumes a number as JSON spells it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	i := s.i
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case i < len(s.b) && '1' <= s.b[i] && s.b[i] <= '9':
		i = digits(s.b, i)
	default:
		return false
	}
	if i < len(s.b) && s.b[i] == '.' {
		j := digits(s.b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		j := digits(s.b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
