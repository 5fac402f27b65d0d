package dblease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A Dialect is what differs between the databases, as a package gives
// it to New: its name, its errors, the statements on a lock's rows, and
// how to read the driver's errors (the Faults, which its locks read too).
type Dialect struct {
	// Faults holds the package's name, Pkg ("pglock"), with which every
	// error message starts, and what an attempt's errors mean.
	Faults

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

	// Look is one look of the clean-up of a row that an interrupted
	// statement may have left held by token (see Client.Abandon), within
	// ctx's deadline: it tells whether conn, the database's ID of the
	// connection that ran the statement, is still alive (false for 0),
	// and then frees the row if token holds it, waking the waiters, and
	// reports whether it did.
	Look func(ctx context.Context, name, token string, conn int64) (freed, alive bool, err error)

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

	// MaxFence is the largest fence a grant may hand out, and
	// FenceOutOfRange the error of a grant of lock name whose fence is
	// larger: the lock is given back.
	MaxFence        uint64
	FenceOutOfRange func(name string, fence uint64) error
}

// A Client is what a package's Client shares with those of other
// databases: its options, the error of one made with bad arguments, its
// observer, the registries of its held leases of each mode, the watchdog
// that renews them, the background clean-ups that Close waits for, and
// its Dialect.
type Client struct {
	Dialect
	Cfg ClientConfig
	Err error          // a bad argument of New, reported by every call
	Obs dlock.Observer // from Cfg's Obs and Log; nil for none

	// Waiters are the Client's Lock calls waiting for a release, which
	// Wait registers: Waiters.Wait, unless the package sets another (one
	// that starts listening for the database's notices, say).
	Waiters Waiters
	Wait    func(name string) *Waiter

	Grants     lease.Registry // lease mode
	Sessions   lease.Registry // session mode
	Renew      *renewal.Scheduler
	Background background.Group

	closing sync.Once // Close's work
}

// New returns the Client of dialect d, options cfg and, if it was made
// with bad arguments, err, which every call then returns.
func New(d Dialect, cfg ClientConfig, err error) *Client {
	c := &Client{Dialect: d, Cfg: cfg, Err: err, Obs: lease.Observer(cfg.Obs, cfg.Log)}
	c.Renew = renewal.New(c.renewBatch)
	c.Wait = c.Waiters.Wait
	return c
}

// Usable returns the error every call on an unusable Client returns: the
// Client's own if it was made with bad arguments, or ErrClosed.
func (c *Client) Usable() error {
	if c.Err != nil {
		return c.Err
	}
	if c.Grants.Closed() {
		return c.ErrClosed
	}
	return nil
}

// notRun reports whether a failed statement did not run: the database
// could not be reached, or it had ended the session.
func (c *Client) notRun(err error) bool {
	return !c.IsServerError(err) || c.EndedByServer(err)
}

// SessionLost returns the cause of a loss of the session: ErrSessionLost
// and the connection's error.
func (c *Client) SessionLost(err error) error { return fmt.Errorf("%w: %w", c.ErrSessionLost, err) }

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
func (c *Client) Clean(look func(ctx context.Context) background.Outcome) bool {
	n := 0 // looks so far; only the clean-up's goroutine touches it
	return c.Background.Clean(func(ctx context.Context) background.Outcome {
		n++
		ctx, cancel := context.WithTimeout(ctx, lookTimeout(n))
		defer cancel()
		return look(ctx)
	})
}

// Free releases the row now if the database answers within LookTimeout,
// whether or not ctx is done, and otherwise in the background (see
// Abandon).
func (c *Client) Free(ctx context.Context, name, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LookTimeout)
	defer cancel()
	if _, err := c.release(ctx, name, token); err != nil && !c.IsServerError(err) {
		c.Abandon(name, token, 0)
	}
}

// Unreached returns the error of a Release begun at start, under the
// caller's ctx, that failed, returning rerr, because a statement failed
// with err: one matching dlock.ErrUnavailable (a *dlock.UnavailableError
// wrapping rerr) if the database could not be reached or could not answer
// (err is not its answer to the statement, it ended the session, or
// Faults.Unavailable says so), unless ctx ended first; otherwise rerr.
func (c *Client) Unreached(ctx context.Context, start time.Time, rerr, err error) error {
	if ctx.Err() != nil || !c.notRun(err) && (c.Unavailable == nil || !c.Unavailable(err)) {
		return rerr
	}
	return c.Down(start, rerr)
}

// release is Dialect.Release, made again while it fails with a transient
// error (see Again).
func (c *Client) release(ctx context.Context, name, token string) (freed bool, err error) {
	err = Again(ctx, c.Transient, func() (err error) {
		freed, err = c.Release(ctx, name, token)
		return err
	})
	return freed, err
}

// refresh is Dialect.Refresh, made again while it fails with a transient
// error (see Again).
func (c *Client) refresh(ctx context.Context, gs []*Grant) (held []bool, err error) {
	err = Again(ctx, c.Transient, func() (err error) {
		held, err = c.Refresh(ctx, gs)
		return err
	})
	return held, err
}

// Abandon frees, in the background, the row of lock name that an
// interrupted statement may have left held by token. conn is the
// database's ID of the connection that ran a statement which may have
// taken the row, or 0 if none did (an interrupted release can only free
// it).
//
// The clean-up looks (see Dialect.Look) until the row is freed, or is
// found not held by token once connection conn has ended: the database
// ends a connection's session only after the statement it was running
// has committed or rolled back, so that no statement of it can land any
// more. While the connection lives (it is closed, but the statement may
// be buffered on its way, or running), the clean-up looks again, with a
// backoff, however long that takes: until the Client is closed, and Close
// waits for it (see Close).
func (c *Client) Abandon(name, token string, conn int64) {
	c.Clean(func(ctx context.Context) background.Outcome { return c.lookAgain(ctx, name, token, conn) })
}

// lookAgain is one look of a clean-up (see Abandon), within ctx's
// deadline.
func (c *Client) lookAgain(ctx context.Context, name, token string, conn int64) background.Outcome {
	freed, alive, err := c.Look(ctx, name, token, conn)
	switch {
	case err != nil && c.IsServerError(err):
		return background.Nothing // the table is gone, or not ours: nothing to free
	case err != nil:
		return background.Unreachable
	case freed || !alive:
		return background.Cleaned
	}
	// The connection lives: what it runs may still take the row. Look
	// again.
	return background.Unreachable
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
func (c *Client) Close(wake func()) error {
	first := false
	c.closing.Do(func() { first = true })
	if !first {
		return nil
	}
	start := time.Now()
	var gerr, serr error
	released := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		wg.Go(func() { _, serr = c.Sessions.Close(closeTimeout, c.ErrClosed) })
		wg.Go(func() { _, gerr = c.Grants.Close(closeTimeout, c.ErrClosed) })
		wg.Wait()
		close(released)
	}()
	var err error
	select {
	case <-released:
		c.Renew.Close()
		err = errors.Join(gerr, serr)
	case <-time.After(closeTimeout):
		// Stop the watchdog, which ends a renewal that holds a session's
		// connection; one that waits for the connection (a check holds
		// it) ends by the lease's Until.
		go c.Renew.Close()
		select {
		case <-released:
			err = errors.Join(gerr, serr)
		case <-time.After(minCleanupWait):
			err = fmt.Errorf("%s: Close: releases did not finish within %v (a session's connection is busy with a database that does not answer); they go on until the leases' Until, and a row they did not free expires within its TTL", c.Pkg, closeTimeout)
		}
	}
	if wake != nil {
		wake()
	}
	if !c.Background.Finish(max(closeTimeout-time.Since(start), minCleanupWait)) {
		err = errors.Join(err, fmt.Errorf("%s: Close: clean-ups of interrupted calls did not finish within %v; a row they had to free expires within its TTL", c.Pkg, closeTimeout))
	}
	return err
}
