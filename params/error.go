package params

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tsgate/tsgate/failure"
)

// Error is a request the gateway cannot serve as given, because of one of
// its parameters. It is the one error type for bad input: parsers, the
// router, the engine and the write path all return it (alone, or several
// in an Errors), and the HTTP layer turns it into a 400 problem whose
// errors member names Param. Message is shown to the client as is: it says
// what is expected.
type Error struct {
	// Param names the parameter as the client wrote it: "from",
	// "queries[2].agg", "points[17].t".
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Param + ": " + e.Message }

// Kind says a bad parameter is bad input.
func (e *Error) Kind() failure.Kind { return failure.BadInput }

// Bad returns an Error for param with a formatted message.
func Bad(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Errors is every bad parameter of one request, in the order found.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	var b strings.Builder
	b.WriteString(es[0].Error())
	fmt.Fprintf(&b, " (and %d more)", len(es)-1)
	return b.String()
}

// Kind says bad parameters are bad input.
func (es Errors) Kind() failure.Kind { return failure.BadInput }

// Err returns es as an error, or nil when it is empty.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Add appends an error for param.
func (es *Errors) Add(param, format string, args ...any) {
	*es = append(*es, Bad(param, format, args...))
}

// List returns every parameter error err holds: an *Error, an Errors, or
// an error wrapping one of them. It returns nil for any other error.
func List(err error) Errors {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	return nil
}

// Rename returns err with every parameter name passed through rename (to
// place the parameters of a part of a request, such as queries[2].agg);
// other errors are returned unchanged.
func Rename(err error, rename func(string) string) error {
	es := List(err)
	if es == nil {
		return err
	}
	out := make(Errors, len(es))
	for i, e := range es {
		out[i] = &Error{Param: rename(e.Param), Message: e.Message}
	}
	return out
}
