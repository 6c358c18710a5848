// Package failure is the gateway's one classification of errors: every
// error a request can end with has a Kind, which says what went wrong in
// terms any front end can answer — bad input, a series that does not
// exist, a store that did not answer — without knowing which package
// failed. Errors get their kind where they are made (a Kind method, or
// Mark); each front end renders kinds in its own envelope (problem+json,
// Grafana's, Prometheus'), from one table each, and nothing else picks a
// status.
package failure

import (
	"context"
	"errors"
)

// Kind is what went wrong.
type Kind int

// The kinds. Internal, the zero value, is the kind of every error nobody
// classified: a bug in the gateway.
const (
	// Internal: the gateway failed; the error is in its log.
	Internal Kind = iota
	// BadInput: the request is invalid (a parameter, a point, a body).
	BadInput
	// NotFound: the series (or route) does not exist.
	NotFound
	// Unauthorized: no token, or an unknown one.
	Unauthorized
	// Forbidden: the token's role is too low, or a browser page of another
	// origin asked for a change.
	Forbidden
	// Blocked: the series is blocked by an operator.
	Blocked
	// TooLarge: the body is over its limit.
	TooLarge
	// UnsupportedMedia: the body's media type is not taken.
	UnsupportedMedia
	// TooManyRequests: a rate limit (such as new series per minute) was
	// reached; retry later.
	TooManyRequests
	// Overloaded: the gateway is serving as much as it may (slots, memory
	// for answers); retry later, nothing was done.
	Overloaded
	// BudgetExceeded: the read did not complete within its latency budget.
	BudgetExceeded
	// Unavailable: the store did not answer.
	Unavailable
	// Canceled: the client went away.
	Canceled
)

// Kinds lists every kind, for tests that walk them through renderers.
var Kinds = []Kind{Internal, BadInput, NotFound, Unauthorized, Forbidden, Blocked, TooLarge, UnsupportedMedia,
	TooManyRequests, Overloaded, BudgetExceeded, Unavailable, Canceled}

var names = map[Kind]string{
	Internal: "internal", BadInput: "bad input", NotFound: "not found", Unauthorized: "unauthorized",
	Forbidden: "forbidden", Blocked: "blocked", TooLarge: "too large", UnsupportedMedia: "unsupported media type",
	TooManyRequests: "too many requests", Overloaded: "overloaded", BudgetExceeded: "budget exceeded",
	Unavailable: "unavailable", Canceled: "canceled",
}

func (k Kind) String() string { return names[k] }

// kinded is an error that knows its kind.
type kinded interface{ Kind() Kind }

// precedence orders the kinds for errors that carry several (a lookup
// that failed because the series is blocked, wrapped as the store's
// failure): the most specific, the one the client can act on, wins.
var precedence = []Kind{Blocked, BadInput, TooLarge, UnsupportedMedia, NotFound, Unauthorized, Forbidden,
	TooManyRequests, Overloaded, BudgetExceeded, Unavailable, Canceled}

// Of is err's kind: of the kinds the errors in its tree have (a Kind
// method, or a deadline or a cancellation of a context), the first in
// precedence; Internal when none has one.
func Of(err error) Kind {
	if err == nil {
		return Internal
	}
	found := map[Kind]bool{}
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
			return
		case kinded:
			found[x.Kind()] = true
		}
		switch {
		case e == context.DeadlineExceeded:
			found[BudgetExceeded] = true
		case e == context.Canceled:
			found[Canceled] = true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	for _, k := range precedence {
		if found[k] {
			return k
		}
	}
	return Internal
}

// Mark gives err the kind k; errors.Is and errors.As still see err.
func Mark(err error, k Kind) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, kind: k}
}

type marked struct {
	err  error
	kind Kind
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }
func (m *marked) Kind() Kind    { return m.kind }

// New is an error of kind k with the message msg.
func New(k Kind, msg string) error { return &marked{err: errors.New(msg), kind: k} }
