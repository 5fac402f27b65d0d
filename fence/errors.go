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

// ErrTooHigh is the error, matched with errors.Is, of a fence refused
// by a guard made with WithMaxJump because it is further above the
// newest fence accepted for the resource than the bound allows. Such a
// guard returns it as a *TooHighError.
var ErrTooHigh = errors.New("fence: fence implausibly far above the newest")

// A TooHighError reports a fence refused by a guard made with
// WithMaxJump: Fence is more than MaxJump above Newest, the highest
// fence accepted for Resource. It matches ErrTooHigh under errors.Is.
type TooHighError struct {
	Resource string
	Fence    uint64
	Newest   uint64
	MaxJump  uint64
}

func (e *TooHighError) Error() string {
	return fmt.Sprintf("fence: fence %d for %q is more than %d (WithMaxJump) above the newest accepted, %d: refused as no holder of the lock could have it; "+
		"if one does, reset the resource's fence or raise the bound", e.Fence, e.Resource, e.MaxJump, e.Newest)
}

// Is reports whether target is ErrTooHigh.
func (e *TooHighError) Is(target error) bool { return target == ErrTooHigh }

// tooHigh reports whether fence is more than maxJump above newest, with
// maxJump 0 for no bound and newest 0 for no fence yet.
func tooHigh(fence, newest, maxJump uint64) bool {
	return maxJump > 0 && newest > 0 && fence > newest && fence-newest > maxJump
}

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
