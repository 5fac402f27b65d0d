package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// unavailable returns the *dlock.UnavailableError of the nodes, failing
// since since, with err the last failure.
func (c *Client) unavailable(since time.Time, err error) error {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.name
	}
	return dlock.Unavailable("redlock "+strings.Join(names, ","), since, err)
}

// An outage follows the attempts of one Lock: since when they have failed
// for want of a majority that could vote (the first of the
// *dlock.UnavailableError in a row), and the last failure.
type outage struct {
	since time.Time
	last  error // nil while a majority answers
}

// note records the error of a failed attempt: a failure for want of a
// majority that could vote starts or continues the outage; an attempt
// that a majority answered ends it; one that ctx cut short (a *cutShort)
// changes nothing, since it tells nothing of the nodes.
func (o *outage) note(err error) {
	var u *dlock.UnavailableError
	var cut *cutShort
	switch {
	case errors.As(err, &u):
		if o.last == nil {
			o.since = u.Since
		}
		o.last = u.Err
	case errors.As(err, &cut):
	default:
		o.last = nil
	}
}

// A cutShort is the error of an attempt that ctx ended before the nodes'
// replies could tell whether a majority could vote. It matches
// dlock.ErrNotObtained and the context's error.
type cutShort struct{ cause error }

func (e *cutShort) Error() string { return dlock.NotObtained(e.cause).Error() }

func (e *cutShort) Unwrap() []error { return []error{dlock.ErrNotObtained, e.cause} }

// interrupted returns the error of a Lock whose wait ended with cause
// after an attempt that failed with why: not obtained, for cause, and,
// while no majority could vote, also unavailable.
func (o *outage) interrupted(c *Client, cause, why error) error {
	if o.last == nil {
		return lease.Interrupted(cause, why)
	}
	return fmt.Errorf("%w: %w: %w", dlock.ErrNotObtained, cause, c.unavailable(o.since, o.last))
}
