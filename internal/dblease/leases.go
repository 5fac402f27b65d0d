package dblease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A Dialect is what the leases need of a package and its database.
type Dialect struct {
	// Pkg is the package's name, with which every error message starts:
	// "pglock".
	Pkg string

	// ErrClosed is the package's error of a closed Client, and
	// ErrSessionLost the cause of the loss of a session-mode lease's
	// session.
	ErrClosed, ErrSessionLost error

	// Release frees the row of lock name if token holds it, and wakes the
	// waiters. It reports whether it did.
	Release func(ctx context.Context, name, token string) (bool, error)

	// Refresh extends the leases gs to their TTL from now. held[i]
	// reports whether gs[i] still holds its row.
	Refresh func(ctx context.Context, gs []*Grant) (held []bool, err error)

	// LookAgain is one look of the clean-up of a row that an interrupted
	// release may have left held by token (see Leases.Abandon), within
	// ctx's deadline.
	LookAgain func(ctx context.Context, name, token string) background.Outcome

	// Describe turns the failure of doing what to the lock called name
	// into an error that says what to do about it.
	Describe func(what, name string, err error) error

	// IsServerError reports whether err is an error the database returned
	// for a statement, as opposed to a failure to reach it.
	IsServerError func(err error) bool

	// EndedByServer reports whether err is the database's word that it
	// ended the session, so that the statement did not run and whatever
	// the session held is gone.
	EndedByServer func(err error) bool

	// Transient reports whether err is a failure that a concurrent
	// statement caused, and that running the statement again at once
	// gets past: a serialization failure, a deadlock, a lock wait that
	// timed out. The statement did not run. Nil: none is.
	Transient func(err error) bool
}

// Leases are what a Client's leases share: the registries of the held
// leases of each mode, the watchdog that renews them, and the background
// clean-ups that Close waits for.
type Leases struct {
	Dialect
	Grants     lease.Registry // lease mode
	Sessions   lease.Registry // session mode
	Renew      *renewal.Scheduler
	Background background.Group

	closing sync.Once // Close's work
}

// New returns the leases of a Client of dialect d.
func New(d Dialect) *Leases {
	ls := &Leases{Dialect: d}
	ls.Renew = renewal.New(ls.renewBatch)
	return ls
}

// Usable returns the error every call on an unusable Client returns: err,
// the Client's own if it was made with bad arguments, or ErrClosed.
func (ls *Leases) Usable(err error) error {
	if err != nil {
		return err
	}
	if ls.Grants.Closed() {
		return ls.ErrClosed
	}
	return nil
}

// notRun reports whether a failed statement did not run: the database
// could not be reached, or it had ended the session.
func (ls *Leases) notRun(err error) bool {
	return !ls.IsServerError(err) || ls.EndedByServer(err)
}

// SessionLost returns the cause of a loss of the session: ErrSessionLost
// and the connection's error.
func (ls *Leases) SessionLost(err error) error { return fmt.Errorf("%w: %w", ls.ErrSessionLost, err) }

// LookTimeout bounds the first look of a clean-up, and Free: one that the
// database does not answer gives way to the next, on another connection,
// soon enough for a database that comes back while Close waits. Each look
// after it has twice as long as the one before, up to MaxLookTimeout, so
// that a database that answers slowly (a new connection and a statement
// through a link slower than half a second) gets the time it needs.
const (
	LookTimeout    = time.Second
	MaxLookTimeout = 8 * time.Second
)

// lookTimeout returns the bound of the nth look of a clean-up (see
// LookTimeout).
func lookTimeout(n int) time.Duration {
	return min(LookTimeout<<min(max(n-1, 0), 3), MaxLookTimeout)
}

// Clean runs a clean-up in the background (see background.Group.Clean),
// each look bounded by lookTimeout. It reports false, and does nothing,
// once the Client is closed.
func (ls *Leases) Clean(look func(ctx context.Context) background.Outcome) bool {
	n := 0 // looks so far; only the clean-up's goroutine touches it
	return ls.Background.Clean(func(ctx context.Context) background.Outcome {
		n++
		ctx, cancel := context.WithTimeout(ctx, lookTimeout(n))
		defer cancel()
		return look(ctx)
	})
}

// Free releases the row now if the database answers within LookTimeout,
// whether or not ctx is done, and otherwise in the background (see
// Abandon).
func (ls *Leases) Free(ctx context.Context, name, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LookTimeout)
	defer cancel()
	if _, err := ls.release(ctx, name, token); err != nil && !ls.IsServerError(err) {
		ls.Abandon(name, token)
	}
}

// release is Dialect.Release, made again while it fails with a transient
// error (see Again).
func (ls *Leases) release(ctx context.Context, name, token string) (freed bool, err error) {
	err = Again(ctx, ls.Transient, func() (err error) {
		freed, err = ls.Release(ctx, name, token)
		return err
	})
	return freed, err
}

// refresh is Dialect.Refresh, made again while it fails with a transient
// error (see Again).
func (ls *Leases) refresh(ctx context.Context, gs []*Grant) (held []bool, err error) {
	err = Again(ctx, ls.Transient, func() (err error) {
		held, err = ls.Refresh(ctx, gs)
		return err
	})
	return held, err
}

// Abandon frees, in the background, the row of lock name that an
// interrupted release may have left held by token, until the database
// answers: see LookAgain.
func (ls *Leases) Abandon(name, token string) {
	ls.Clean(func(ctx context.Context) background.Outcome { return ls.LookAgain(ctx, name, token) })
}

// closeTimeout bounds Close's waits in all: for the releases of the
// leases still held, and then, for what is left of it, for the clean-ups
// of interrupted calls. A database that does not answer within it is not
// waited for: what Close could not free expires within its TTL.
const closeTimeout = 1500 * time.Millisecond

// minCleanupWait is the least Close waits for the clean-ups, even when the
// releases took all of closeTimeout: those of a database that answers
// take milliseconds.
const minCleanupWait = 100 * time.Millisecond

// Close releases every lease still held, ending it with
// dlock.ErrReleased, stops the watchdog, calls wake if it is not nil, and
// waits for the background clean-ups, for closeTimeout in all, and at
// most 2*minCleanupWait more if the releases took it all. It does its work
// once: later calls return nil.
//
// A session-mode release that waits for its connection, which a renewal
// or a check that the database does not answer holds until the lease's
// Until, is not waited for past closeTimeout: the watchdog is stopped,
// which ends the renewal, and the release goes on in the background, done
// by Until at the latest.
func (ls *Leases) Close(wake func()) error {
	first := false
	ls.closing.Do(func() { first = true })
	if !first {
		return nil
	}
	start := time.Now()
	var gerr, serr error
	released := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { _, serr = ls.Sessions.Close(closeTimeout, ls.ErrClosed) })
		wg.Go(func() { _, gerr = ls.Grants.Close(closeTimeout, ls.ErrClosed) })
		wg.Wait()
		close(released)
	}()
	var err error
	select {
	case <-released:
		ls.Renew.Close()
		err = errors.Join(gerr, serr)
	case <-time.After(closeTimeout):
		// Stop the watchdog, which ends a renewal that holds a session's
		// connection; one that waits for the connection (a check holds
		// it) ends by the lease's Until.
		go ls.Renew.Close()
		select {
		case <-released:
			err = errors.Join(gerr, serr)
		case <-time.After(minCleanupWait):
			err = fmt.Errorf("%s: Close: releases did not finish within %v (a session's connection is busy with a database that does not answer); they go on until the leases' Until, and a row they did not free expires within its TTL", ls.Pkg, closeTimeout)
		}
	}
	if wake != nil {
		wake()
	}
	if !ls.Background.Finish(max(closeTimeout-time.Since(start), minCleanupWait)) {
		err = errors.Join(err, fmt.Errorf("%s: Close: clean-ups of interrupted calls did not finish within %v; a row they had to free expires within its TTL", ls.Pkg, closeTimeout))
	}
	return err
}
