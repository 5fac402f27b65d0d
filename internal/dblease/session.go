package dblease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A Session is a session-mode lease: the lock's row holds its token, and
// its connection's session holds the database's own lock, which goes with
// the session. The connection, and what the database offers to watch it,
// is the package's: see SessionConn.
//
// The row stays held until it expires, no sooner than the lease's Until,
// unless the holder releases it: the database may end a session without
// its holder hearing.
type Session struct {
	*lease.State
	c     *Client
	cfg   Config
	conn  SessionConn
	entry renewal.Entry
}

var _ dlock.Lease = (*Session)(nil)

// A SessionConn is a session-mode lease's connection, which holds the
// session's lock. Its methods may be called concurrently.
type SessionConn interface {
	// Watch starts watching the idle connection, so that a session the
	// database ends, or a broken connection, ends s at once with a cause
	// made by Client.SessionLost.
	Watch(s *Session)

	// Stop stops the watching, when s has ended.
	Stop()

	// Confirm extends the row, on the connection, to the TTL from now,
	// and makes sure that the session still holds the lock. It returns
	// when the request was sent; ErrNotHeld if the row is not s's any
	// more; ErrEnded if the connection has been given back or closed. On
	// any other failure it closes the connection, which makes sure the
	// session's lock goes.
	Confirm(ctx context.Context, s *Session) (time.Time, error)

	// Unlock frees the row and the session's lock on the connection and
	// gives the connection back to the pool, or closes it if anything
	// failed. It reports whether the row was s's. It returns ErrEnded if
	// the connection was already given back or closed, and ErrDropped if
	// it was closed for want of an answer by Until.
	Unlock(ctx context.Context, s *Session) (freed bool, err error)

	// ReleaseFailed ends s, for Release, after Unlock failed with err,
	// neither ErrEnded nor ErrDropped: the connection is closed, and the
	// row may still be s's. It returns the error Release is to return, or
	// nil if Release is to return the error s ended with.
	ReleaseFailed(ctx context.Context, s *Session, err error) error
}

var (
	// ErrEnded is what a use of a session's connection returns once the
	// connection has been given back or closed. It never reaches a
	// caller.
	ErrEnded = errors.New("dblease: the session lease has ended")

	// ErrDropped is what Unlock returns when the connection was closed for
	// want of an answer by Until, and the row may still be the lease's. It
	// matches ErrEnded.
	ErrDropped = fmt.Errorf("%w: its connection was closed, unanswered", ErrEnded)

	// ErrNotHeld is what Confirm returns when the row is no longer held by
	// the lease's token.
	ErrNotHeld = errors.New("dblease: the lock's row is not held by the session lease")
)

// disposeTimeout bounds the release of a session's lock whose lease ended
// without Release: past it, the connection is closed, which frees it too.
const disposeTimeout = 5 * time.Second

// NewSession returns the lease of lock name on conn, held by token with
// fence until until, under options cfg; Keep registers it with the
// Client.
func NewSession(ctx context.Context, c *Client, ev *lease.Events, name, token string, fence uint64, until time.Time, cfg Config, conn SessionConn) *Session {
	s := &Session{c: c, cfg: cfg, conn: conn}
	s.State = lease.New(ctx, ev, name, token, fence, until, s.ended)
	if cfg.MaxHold > 0 {
		s.CapHold(time.Now().Add(cfg.MaxHold))
	}
	s.entry.Value = s
	s.Start()
	return s
}

// SessionGranted hands out the session-mode lease that the statements
// sent at start granted to token, with fence, on conn: made and
// registered with the Client, and checked fresh (see lease.Fresh). If the
// grant came too late to be a lease, it calls drop, which must close the
// connection (and so free the session's lock), and frees the row. If the
// fence is past the Dialect's MaxFence, or ctx is done, it ends the lease,
// which frees both. Either way it returns the error of the attempt.
func (l *Locker) SessionGranted(ctx context.Context, token string, fence uint64, start time.Time, conn SessionConn, drop func()) (dlock.Lease, time.Duration, error) {
	until := lease.Validity(start, l.Cfg.TTL)
	if !time.Now().Before(until) {
		// Too slow to be a lease: a State made with its Until past would
		// end, and run its clean-up, before it was fully made.
		drop()
		l.c.Free(ctx, l.Name, token)
		return nil, time.Millisecond, l.tooSlow(start)
	}
	s := NewSession(ctx, l.c, l.Events, l.Name, token, fence, until, l.Cfg, conn)
	if fence > l.c.MaxFence {
		s.Release(context.WithoutCancel(ctx)) // never handed out: frees the row and the session's lock
		return nil, 0, l.c.FenceOutOfRange(l.Name, fence)
	}
	if cause := Cancelled(ctx, nil); cause != nil {
		// Do not hand a lock to a caller that has stopped waiting for it.
		s.End(dlock.Lost(cause))
		return nil, 0, dlock.NotObtained(cause)
	}
	if !time.Now().Before(s.Until()) {
		s.End(dlock.Lost(dlock.ErrExpired))
		return nil, time.Millisecond, l.tooSlow(start)
	}
	if err := s.Keep(); err != nil {
		return nil, 0, err
	}
	if err := lease.Fresh(ctx, s, l.Cfg.TTL); err != nil {
		return nil, time.Millisecond, err
	}
	return s, 0, nil
}

// TTL returns the lease's TTL.
func (s *Session) TTL() time.Duration { return s.cfg.TTL }

// Keep registers s, just granted, with the Client, starts watching its
// connection and, unless renewal is off, registers it with the watchdog.
// If the Client is closed, it ends s, which frees the row and the
// session's lock, and returns an error matching both ErrClosed and
// dlock.ErrNotObtained: the grant came as Close began.
func (s *Session) Keep() error {
	if !s.c.Sessions.Add(s) {
		s.End(dlock.Lost(s.c.ErrClosed))
		return dlock.NotObtained(s.c.ErrClosed)
	}
	s.conn.Watch(s)
	if s.cfg.Renew {
		s.c.Renew.Add(&s.entry, s.cfg.TTL/3)
	}
	if s.Err() != nil { // ended already: make sure it is forgotten
		s.forget()
	}
	return nil
}

// forget stops renewing and watching an ended lease and drops it from the
// client.
func (s *Session) forget() {
	s.conn.Stop()
	s.c.Renew.Remove(&s.entry)
	s.c.Sessions.Remove(s)
}

// ended runs when the lease ends, for whatever reason: unless Release has
// already done so, it releases the row and the session's lock on the
// lease's connection, as a clean-up that Close waits for, and frees the
// row through another connection if that fails.
func (s *Session) ended() {
	s.forget()
	first := true
	look := func(ctx context.Context) background.Outcome {
		if first {
			first = false
			if s.dispose(ctx) {
				return background.Cleaned
			}
		}
		return s.c.lookAgain(ctx, s.Key(), s.Token(), 0)
	}
	if !s.c.Clean(look) {
		go s.dispose(context.Background())
	}
}

// dispose releases the row and the session's lock on the lease's
// connection, within disposeTimeout; if that fails, the connection is
// closed, which frees the session's lock. It reports whether the row is
// done with: released, here or by Release (which gave the connection back
// or closed it, and frees the row itself if it must), or left to expire
// because the lease ended with its session (the database may have ended
// it unheard by the holder, who counts on the lease until its Until).
// Otherwise the row may still hold the lease's token.
func (s *Session) dispose(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, disposeTimeout)
	defer cancel()
	_, err := s.conn.Unlock(ctx, s)
	return err == nil || errors.Is(err, ErrEnded) && !errors.Is(err, ErrDropped) || errors.Is(s.Err(), s.c.ErrSessionLost)
}

// extend confirms the lease and extends it to the TTL from the moment it
// asked. It reports whether the lease is still held. A confirmation that
// finds the lease lost ends it with Lose; Release does not mark a Session
// as releasing (see lease.State.BeginRelease), since the two take turns
// on the connection, and a confirmation that comes second finds it given
// back (ErrEnded).
func (s *Session) extend(ctx context.Context) bool {
	ctx, cancel := context.WithDeadline(ctx, s.Until()) // past Until, the lease has ended anyway
	defer cancel()
	start, err := s.conn.Confirm(ctx, s)
	switch {
	case err == nil:
		return s.Extend(lease.Validity(start, s.cfg.TTL))
	case errors.Is(err, ErrNotHeld):
		s.Lose(dlock.Lost(dlock.ErrTakenOver))
	case !errors.Is(err, ErrEnded):
		s.Lose(dlock.Lost(s.c.SessionLost(err)))
	}
	return false
}

// renew is the watchdog's renewal: it returns when to renew next, or the
// zero time to stop.
func (s *Session) renew(ctx context.Context) time.Time {
	if s.extend(ctx) {
		return time.Now().Add(s.cfg.TTL / 3)
	}
	return time.Time{}
}

// Refresh confirms that the session still holds the lock and extends the
// lease to a full TTL from now. If ctx is done first, Refresh returns its
// error while the confirmation goes on, by Until at the latest, so that a
// short ctx does not cost the lock (an interrupted statement would close
// the connection).
func (s *Session) Refresh(ctx context.Context) error {
	if ended, err := s.Ended(false); ended {
		return err
	}
	held := make(chan bool, 1)
	go func() { held <- s.extend(context.WithoutCancel(ctx)) }()
	select {
	case ok := <-held:
		if ok {
			return nil
		}
		_, err := s.Ended(false)
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: refresh of %q: %w (the confirmation goes on; the lease stands unless it fails)", s.c.Pkg, s.Key(), ctx.Err())
	}
}

// Release frees the row, lets go of the session's lock and gives the
// connection back to the pool. If that fails, the connection is closed
// instead, which frees the session's lock, and the row is freed through
// another connection, in the background if need be (see
// SessionConn.ReleaseFailed). A holder that releases a lease whose
// session has ended frees its row the same way: it is done with it, and
// the row would otherwise stay held until it expires. It waits for the
// database at most the lease's attempt timeout (see AttemptTimeout),
// whatever ctx says, and for a renewal under way on the connection until
// the lease's Until at most. Its error matches dlock.ErrUnavailable if
// the database could not be reached or did not answer (see
// Client.Unreached).
func (s *Session) Release(ctx context.Context) error {
	if ended, err := s.Ended(true); ended {
		s.letGo(err)
		return err
	}
	s.c.Renew.Remove(&s.entry)
	start, caller := time.Now(), ctx
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout(s.cfg.TTL))
	defer cancel()
	freed, err := s.conn.Unlock(ctx, s)
	switch {
	case errors.Is(err, ErrEnded): // ended as Release began
	case err != nil:
		if rerr := s.conn.ReleaseFailed(ctx, s, err); rerr != nil {
			return s.c.Unreached(caller, start, rerr, err)
		}
	case !freed:
		s.End(dlock.Lost(dlock.ErrTakenOver))
	default:
		s.End(dlock.ErrReleased)
	}
	_, err = s.Ended(true)
	s.letGo(err)
	return err
}

// letGo frees the lease's row in the background if err, what Release
// returns, says that the session ended: the row may still hold the
// lease's token.
func (s *Session) letGo(err error) {
	if errors.Is(err, s.c.ErrSessionLost) {
		s.c.Abandon(s.Key(), s.Token(), 0)
	}
}
