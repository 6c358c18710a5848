package cursor

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// listCursorVersion is the first byte of a listing cursor.
const listCursorVersion = 1

// listCheckLen is the length of a listing cursor's check digest.
const listCheckLen = 4

// maxListCursorID bounds the id a listing cursor carries; series ids are
// shorter still.
const maxListCursorID = 256

// EncodeList returns the next_cursor of a series listing whose page
// ended at lastID: the id, versioned and checked, base64url without
// padding. The id is not secret (any id resumes the sorted listing after
// it), so the check is a digest rather than a signature: it makes a
// cursor that was typed, truncated or made up a clear 400 instead of a
// listing that silently starts somewhere.
func EncodeList(lastID string) string {
	buf := make([]byte, 0, 1+len(lastID)+listCheckLen)
	buf = append(buf, listCursorVersion)
	buf = append(buf, lastID...)
	buf = append(buf, listCheck(buf)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// DecodeList returns the last id of the page a listing cursor was
// issued for. Only the exact token EncodeList produces is accepted;
// anything else fails with ErrCursorMalformed or ErrCursorVersion.
func DecodeList(token string) (string, error) {
	if token == "" || len(token) > base64.RawURLEncoding.EncodedLen(1+maxListCursorID+listCheckLen) {
		return "", ErrCursorMalformed
	}
	buf, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || base64.RawURLEncoding.EncodeToString(buf) != token {
		return "", ErrCursorMalformed
	}
	if len(buf) < 1+1+listCheckLen {
		return "", ErrCursorMalformed
	}
	body, check := buf[:len(buf)-listCheckLen], buf[len(buf)-listCheckLen:]
	if string(check) != string(listCheck(body)) {
		// Checked before the version, so that made-up text is called
		// malformed rather than old.
		return "", fmt.Errorf("%w: check digest does not match", ErrCursorMalformed)
	}
	if buf[0] != listCursorVersion {
		return "", ErrCursorVersion
	}
	return string(body[1:]), nil
}

func listCheck(body []byte) []byte {
	h := sha256.New()
	h.Write([]byte("tsgate series listing\x00"))
	h.Write(body)
	return h.Sum(nil)[:listCheckLen]
}
