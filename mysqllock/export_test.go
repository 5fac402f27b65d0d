package mysqllock

import (
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// WrapAttempts has l, a Mutex or a SessionMutex not yet in use, make its
// attempts through wrap: for the tests that end a Lock's ctx at a moment
// of their choosing between an attempt's outcome and Lock's reading of it
// (see dbleasetest.DB.WrapAttempts).
func WrapAttempts(l dlock.Locker, wrap func(dblease.AttemptFunc) dblease.AttemptFunc) {
	switch l := l.(type) {
	case *Mutex:
		l.core.Attempt = wrap(l.core.Attempt)
	case *SessionMutex:
		l.core.Attempt = wrap(l.core.Attempt)
	default:
		panic("mysqllock: WrapAttempts of a " + fmt.Sprintf("%T", l))
	}
}
