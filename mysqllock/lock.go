package mysqllock

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// A locker is what Mutex and SessionMutex share: the lock's name, options
// and events, and the way Lock and TryLock go about their attempts (see
// dblease.Locker), which are the only thing the two modes do differently.
// While a session holds the lock's GET_LOCK lock, a session-mode attempt
// waits on the server, up to its block argument, for its release, which
// ends the wait at once (see dblease.Busy); a lease-mode attempt ignores
// block.
type locker struct {
	c    *Client
	core *dblease.Locker
}

func newLocker(c *Client, name, kind string, session bool, opts []Option, attempt dblease.AttemptFunc) locker {
	cfg := dblease.NewConfig(DefaultTTL, DefaultRetry)
	dblease.Apply(&cfg, opts)
	err := errors.Join(checkName(name), cfg.Check("mysqllock", MinTTL, MaxTTL))
	return locker{c: c, core: c.core.NewLocker(name, kind, session, cfg, err, attempt)}
}

// Name returns the lock's name.
func (l *locker) Name() string { return l.core.Name }

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it, and one matching
// dlock.ErrUnavailable if the database cannot be reached or does not
// answer within the attempt timeout (see Faults in the package doc).
func (l *locker) TryLock(ctx context.Context) (dlock.Lease, error) { return l.core.TryLock(ctx) }

// Lock takes the lock, waiting until it is free, ctx is done or the retry
// strategy gives up. A waiter tries again when the retry strategy says so
// (see DefaultRetry), when the holder's row expires, or at once when a
// lease of the same Client releases the lock. If ctx
// is done first, the error matches both dlock.ErrNotObtained and
// ctx.Err().
func (l *locker) Lock(ctx context.Context) (dlock.Lease, error) { return l.core.Lock(ctx) }
