package ingest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"

	"github.com/tsgate/tsgate/jsonenc"
	"github.com/tsgate/tsgate/params"
)

// DecodeCSV reads one point per line as series,t,v — t in Unix
// milliseconds or RFC 3339, v a finite number — with an optional header
// line "series,t,v" first. Blank lines are skipped. Fields may be quoted
// ("..."); series ids cannot contain commas or quotes, so no field needs
// escapes. Errors name points[i].field, i counting the points (the header
// and blank lines excluded), like DecodeNDJSON's.
func DecodeCSV(r io.Reader, now int64) (Batch, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	verr := &ValidationError{}
	var points []Point
	i := 0
	first := true
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		fields := bytes.Split(line, []byte{','})
		for j := range fields {
			fields[j] = unquote(bytes.TrimSpace(fields[j]))
		}
		if first {
			first = false
			if isHeader(fields) {
				continue
			}
		}
		if p, ok := checkCSVPoint(fields, i, now, verr); ok {
			points = append(points, p)
			verr.decoded = append(verr.decoded, i)
		}
		i++
	}
	if err := sc.Err(); err != nil {
		return Batch{}, lineError(err, i)
	}
	return finish(points, nil, verr)
}

func unquote(b []byte) []byte {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return b[1 : len(b)-1]
	}
	return b
}

func isHeader(fields [][]byte) bool {
	return len(fields) == 3 && bytes.EqualFold(fields[0], []byte("series")) &&
		bytes.EqualFold(fields[1], []byte("t")) && bytes.EqualFold(fields[2], []byte("v"))
}

func checkCSVPoint(fields [][]byte, i int, now int64, verr *ValidationError) (Point, bool) {
	if len(fields) != 3 {
		verr.Invalid++
		verr.add(fmt.Sprintf("points[%d]", i), fmt.Sprintf("must be a line series,t,v (found %d fields)", len(fields)))
		return Point{}, false
	}
	var p Point
	ok := true
	bad := func(field, msg string) {
		if ok {
			verr.Invalid++
		}
		ok = false
		verr.add(fmt.Sprintf("points[%d].%s", i, field), msg)
	}
	p.Series = string(fields[0])
	if err := params.SeriesID(p.Series); err != nil {
		bad("series", err.Error())
	}
	if len(fields[1]) == 0 {
		bad("t", "required: Unix milliseconds or an RFC 3339 string")
	} else if t, err := params.Time(string(fields[1]), now); err != nil {
		bad("t", err.Error())
	} else {
		p.T = t
	}
	v, err := jsonenc.ParseFloat(fields[2])
	switch {
	case len(fields[2]) == 0:
		bad("v", "required: a finite number")
	case err != nil || math.IsInf(v, 0) || math.IsNaN(v):
		bad("v", "must be a finite number (float64), got "+truncate(string(fields[2])))
	default:
		p.V = v
	}
	return p, ok
}
