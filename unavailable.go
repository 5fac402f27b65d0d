package dlock

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable is matched by the error of a call that could not reach
// the lock's servers, or that they could not answer: a connection refused,
// reset or timed out, a server loading its data, a failover or an election
// under way. Whether the lock is free or held is then unknown.
//
// TryLock returns it, within the backend's stated bound, and never with
// ErrNotObtained: "unavailable" is not "held by another owner". Lock waits
// through such faults, backing off, and returns it only when its context
// ends first, together with ErrNotObtained and the context's error. The
// error is an *UnavailableError, which names the servers and says since
// when they have failed.
var ErrUnavailable = errors.New("dlock: lock service unavailable")

// An UnavailableError reports that a lock's servers could not be reached
// or could not answer. It matches ErrUnavailable under errors.Is, and
// unwraps to the last failure.
type UnavailableError struct {
	// Service names the servers the call tried: an address, or a list.
	Service string
	// Since is when the first of the call's failed attempts began; the
	// servers have failed every attempt since.
	Since time.Time
	// Err is the last attempt's failure.
	Err error

	at time.Time // when Unavailable made it
}

// Unavailable returns an *UnavailableError for service, failing since
// since, with err the last failure. Backends use it.
func Unavailable(service string, since time.Time, err error) error {
	return &UnavailableError{Service: service, Since: since, Err: err, at: time.Now()}
}

// Error says which servers failed, since when (UTC) and for how long, and
// why.
func (e *UnavailableError) Error() string {
	since := e.Since.UTC().Format("15:04:05.000Z")
	if e.at.IsZero() {
		return fmt.Sprintf("dlock: %s unavailable since %s: %v", e.Service, since, e.Err)
	}
	return fmt.Sprintf("dlock: %s unavailable since %s (%s): %v", e.Service, since, readable(e.at.Sub(e.Since)), e.Err)
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the last failure.
func (e *UnavailableError) Unwrap() error { return e.Err }

// readable rounds d to what a person reads: whole milliseconds below a
// second, tenths of a second below a minute, whole seconds above.
func readable(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
