package fence

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ErrStale is the error, matched with errors.Is, of a write refused
// because its fence is lower than the highest fence already accepted for
// the same resource: a later holder of the lock has written, and the
// caller's lease is no longer current. Every guard in this package returns
// it, as a *StaleError.
var ErrStale = errors.New("fence: stale fence")

// A StaleError reports a refused write: Fence is the fence it came with,
// Newest the highest fence accepted for Resource before it. It matches
// ErrStale under errors.Is.
type StaleError struct {
	Resource string
	Fence    uint64
	Newest   uint64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale fence %d for %q: a later holder of the lock has written with fence %d",
		e.Fence, e.Resource, e.Newest)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// maxResource is the longest resource name, in bytes, that the guards
// other than SQL accept; SQL takes at most maxSQLResource.
const maxResource = 4096

// checkInput returns an error naming what is wrong with a resource name
// or a fence, or nil. No lease gives fence 0, and fences above 2^63-1 do
// not fit the signed 64-bit columns that SQL keeps them in.
func checkInput(resource string, fence uint64, maxLen int) error {
	switch {
	case resource == "":
		return badInput{"fence: empty resource name"}
	case len(resource) > maxLen:
		return badInput{fmt.Sprintf("fence: resource name is %d bytes long; the limit is %d", len(resource), maxLen)}
	case !utf8.ValidString(resource):
		return badInput{fmt.Sprintf("fence: resource name %q is not valid UTF-8", resource)}
	case fence == 0 || fence > math.MaxInt64:
		return badInput{fmt.Sprintf("fence: fence %d for %q is not one a lease gives: want 1 to 2^63-1", fence, resource)}
	}
	return nil
}

// badInput is the error of a resource name or fence that no guard takes,
// which Handler answers with 400 Bad Request.
type badInput struct{ msg string }

func (e badInput) Error() string { return e.msg }

// Parse returns the fence written in decimal in s, as a lease's Fence
// prints it (and as dlock run puts it in DLOCK_FENCE), or an error that
// quotes s if it is not a fence from 1 to 2^63-1.
func Parse(s string) (uint64, error) {
	f, err := strconv.ParseUint(s, 10, 64)
	if err != nil || f == 0 || f > math.MaxInt64 {
		return 0, fmt.Errorf("fence: %q is not a fence: want a decimal number from 1 to 2^63-1", s)
	}
	return f, nil
}
