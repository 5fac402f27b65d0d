package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// A sessionConn is a SessionMutex's lease's connection, whose session
// holds the GET_LOCK lock; the lease itself is a dblease.Session.
//
// database/sql gives no way to wait on an idle connection for the server
// closing it, so a goroutine pings the connection every check interval
// (config.checkEvery): a session that the server ended (KILL CONNECTION,
// wait_timeout, a shutdown) or a broken connection fails the ping, which
// ends the lease.
type sessionConn struct {
	m      *SessionMutex
	id     int64 // the server's ID of the connection that took the lock
	before int64 // the wait_timeout to restore on release

	mu      sync.Mutex // held while the connection is in use
	conn    *conn      // nil once given back to the pool, or closed
	dropped bool       // the connection was closed at Until by a check or renewal that got no answer
	stop    chan struct{}
	stopped sync.Once
}

var _ dblease.SessionConn = (*sessionConn)(nil)

// Watch starts the goroutine that checks the connection every check
// interval, until the lease ends.
func (c *sessionConn) Watch(s *dblease.Session) {
	go func() {
		t := time.NewTicker(checkEvery(c.m.core.Cfg))
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			if err := c.check(s); err != nil {
				if !errors.Is(err, dblease.ErrEnded) {
					s.End(dlock.Lost(c.m.c.core.SessionLost(err)))
				}
				return
			}
		}
	}()
}

// Stop stops the checks.
func (c *sessionConn) Stop() { c.stopped.Do(func() { close(c.stop) }) }

// check pings the lease's connection, waiting no later than Until. On
// failure it closes the connection, which makes sure the GET_LOCK lock
// goes.
func (c *sessionConn) check(s *dblease.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return dblease.ErrEnded
	}
	ctx, cancel := context.WithDeadline(context.Background(), s.Until())
	defer cancel()
	err := c.conn.PingContext(ctx)
	if err != nil {
		discard(c.conn.Conn)
		c.conn = nil
		if ctx.Err() != nil {
			// No answer by Until: the lease ends then by itself, for
			// whatever reason it does (expiry, its maximum hold), and
			// its row is freed through the pool (see Unlock).
			c.dropped = true
			return dblease.ErrEnded
		}
	}
	return err
}

// Confirm extends the row, on the lease's connection, to the TTL from
// now, if the row is the lease's and the session holds the GET_LOCK lock.
// It returns when the request was sent, and dblease.ErrNotHeld if the
// row is not the lease's any more. On any other failure it closes the
// connection, which makes sure the GET_LOCK lock goes.
//
// If ctx is done first (at Until, or the Client is closing), the lease
// ends at Until by itself, as expired, and its row is freed through the
// pool (see Unlock): Confirm waits for that, so that a Refresh reports
// it, and returns dblease.ErrEnded.
func (c *sessionConn) Confirm(ctx context.Context, s *dblease.Session) (time.Time, error) {
	start, err := c.confirm(ctx, s)
	if err != nil && ctx.Err() != nil {
		select {
		case <-s.Done():
		case <-time.After(time.Until(s.Until()) + 50*time.Millisecond):
		}
		return start, dblease.ErrEnded
	}
	return start, err
}

func (c *sessionConn) confirm(ctx context.Context, s *dblease.Session) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return time.Time{}, dblease.ErrEnded
	}
	start := time.Now()
	name, token, lock := c.m.core.Name, s.Token(), c.m.lockName
	res, err := c.conn.ExecContext(ctx, fill(c.m.c.sql.sessionRefresh, name, token, lock, dblease.Units(c.m.core.Cfg.TTL, time.Microsecond)))
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			// Not extended: the row is not ours, the GET_LOCK lock is not
			// the session's, or the expiry did not change.
			var row, locked bool
			err = c.conn.QueryRowContext(ctx, fill(c.m.c.sql.sessionCheck, name, token, lock)).Scan(&row, &locked)
			switch {
			case err != nil:
			case !row:
				return start, dblease.ErrNotHeld
			case !locked:
				err = fmt.Errorf("connection %d does not hold GET_LOCK lock %s (a proxy that does not pin sessions?)", c.id, lock)
			}
		}
	}
	if err != nil {
		discard(c.conn.Conn)
		c.conn = nil
		c.dropped = ctx.Err() != nil
		return start, err
	}
	return start, nil
}

// Unlock frees the row and the GET_LOCK lock on the lease's connection,
// restores the session's wait_timeout, wakes the Client's waiters and
// gives the connection back to the pool (see conn.done), or closes it if
// anything failed.
// It reports whether the row was the lease's. It returns
// dblease.ErrDropped if a check or confirmation closed the connection
// for want of an answer by Until: the row may still be the lease's.
func (c *sessionConn) Unlock(ctx context.Context, s *dblease.Session) (freed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil && c.dropped {
		return false, dblease.ErrDropped
	}
	if c.conn == nil {
		return false, dblease.ErrEnded
	}
	res, err := c.conn.ExecContext(ctx, fill(c.m.c.sql.release, c.m.core.Name, s.Token()))
	if err == nil {
		n, _ := res.RowsAffected()
		freed = n == 1
		_, err = c.conn.ExecContext(ctx, fill(c.m.c.sql.sessionUnlock, c.m.lockName, c.before))
	}
	if err == nil {
		c.conn.done(ctx)
	} else {
		discard(c.conn.Conn)
	}
	c.conn = nil
	if freed {
		c.m.c.core.Waiters.Wake(c.m.core.Name)
	}
	return freed, err
}

// ReleaseFailed ends s after its Unlock failed with err: the connection
// is closed, which frees the GET_LOCK lock. The row is freed, if it is
// still s's, through the pool, or else in the background.
func (c *sessionConn) ReleaseFailed(ctx context.Context, s *dblease.Session, err error) error {
	if !isServerError(err) {
		// The connection failed (the database may have ended the session
		// before the release reached it): it is closed now, and the
		// GET_LOCK lock with it. Free the row, if it is still ours,
		// through the pool.
		freed, perr := c.m.c.release(ctx, s.Key(), s.Token())
		switch {
		case perr == nil && freed:
			s.End(dlock.ErrReleased)
		case perr == nil:
			s.End(dlock.Lost(c.m.c.core.SessionLost(err)))
		default:
			c.m.c.core.Abandon(s.Key(), s.Token(), 0)
			if s.End(dlock.ErrReleased) {
				return fmt.Errorf("mysqllock: release of %q did not complete (its connection is closed, which frees the GET_LOCK lock, and the row is freed in the background; at worst it expires within its TTL): %w",
					s.Key(), c.m.c.describe("releasing", s.Key(), errors.Join(err, perr)))
			}
		}
		return nil
	}
	c.m.c.core.Abandon(s.Key(), s.Token(), 0)
	if s.End(dlock.ErrReleased) {
		return fmt.Errorf("mysqllock: release of %q failed (its connection is closed instead, which frees the GET_LOCK lock, and the row is freed in the background; at worst it expires within its TTL): %w",
			s.Key(), c.m.c.describe("releasing", s.Key(), err))
	}
	return nil
}
