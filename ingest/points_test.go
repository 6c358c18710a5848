package ingest

import "io"

// pointsOf is the points of a decoded batch, for tests of the points.
func pointsOf(b Batch, err error) ([]Point, error) { return b.Points, err }

// The decoders as decoders of points only.
func decodeJSONPoints(r io.Reader, now int64) ([]Point, error) { return pointsOf(DecodeJSON(r, now)) }
func decodeJSONStreamPoints(r io.Reader, now int64) ([]Point, error) {
	return pointsOf(decodeJSONStream(r, now))
}
