package pglock

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// A locker is what Mutex and SessionMutex share: the lock's name, options
// and events, and the way Lock and TryLock go about their attempts (see
// dblease.Locker), which are the only thing the two modes do differently.
type locker struct {
	c    *Client
	core *dblease.Locker
}

func newLocker(c *Client, name, kind string, session bool, opts []Option, attempt dblease.AttemptFunc) locker {
	cfg := dblease.NewConfig(DefaultTTL, DefaultRetry)
	dblease.Apply(&cfg, opts)
	err := errors.Join(checkName("lock", name), cfg.Check("pglock", MinTTL, MaxTTL))
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
// strategy gives up. A waiter is woken at once by the holder's release
// notice; otherwise it tries again when the retry strategy says so. It
// waits so through failures to reach the database, too (see Faults in the
// package doc). If ctx is done first, the error matches both
// dlock.ErrNotObtained and ctx.Err(), and also dlock.ErrUnavailable if
// the last attempt could not reach the database.
func (l *locker) Lock(ctx context.Context) (dlock.Lease, error) { return l.core.Lock(ctx) }
