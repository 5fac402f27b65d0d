package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A session is a SessionMutex's lease: the lock's row holds its token,
// and its connection's session holds the GET_LOCK lock.
//
// database/sql gives no way to wait on an idle connection for the server
// closing it, so a goroutine pings the connection every check interval
// (config.checkEvery): a session that the server ended (KILL CONNECTION,
// wait_timeout, a shutdown) or a broken connection fails the ping, which
// ends the lease. The row stays held until it expires, no sooner than the
// lease's Until, unless the holder releases it: the database may end a
// session without its holder hearing.
type session struct {
	*lease.State
	m      *SessionMutex
	entry  renewal.Entry
	id     int64 // the server's ID of the connection that took the lock
	before int64 // the wait_timeout to restore on release

	mu      sync.Mutex // held while the connection is in use
	conn    *sql.Conn  // nil once given back to the pool, or closed
	dropped bool       // the connection was closed at Until by a check or renewal that got no answer
	stop    chan struct{}
	stopped sync.Once
}

var _ dlock.Lease = (*session)(nil)

// errEnded is what a use of a session's connection returns once the
// connection has been given back.
var errEnded = errors.New("mysqllock: the session lease has ended")

// errNotHeld is what a confirmation returns when the row is no longer
// held by the lease's token.
var errNotHeld = errors.New("mysqllock: the lock's row is not held by the session lease")

// disposeTimeout bounds the release of a GET_LOCK lock whose lease ended
// without Release: past it, the connection is closed, which frees it too.
const disposeTimeout = 5 * time.Second

func newSession(ctx context.Context, m *SessionMutex, conn *sql.Conn, id, before int64, token string, fence uint64, until time.Time) *session {
	s := &session{m: m, conn: conn, id: id, before: before, stop: make(chan struct{})}
	s.State = lease.New(ctx, m.ev, m.name, token, fence, until, s.ended)
	if m.cfg.maxHold > 0 {
		s.CapHold(time.Now().Add(m.cfg.maxHold))
	}
	s.entry.Value = s
	return s
}

// forget stops renewing and watching an ended lease and drops it from the
// client.
func (s *session) forget() {
	s.stopped.Do(func() { close(s.stop) })
	s.m.c.renew.Remove(&s.entry)
	s.m.c.sessions.Remove(s)
}

// ended runs when the lease ends, for whatever reason: unless Release has
// already done so, it releases the row and the GET_LOCK lock on the
// lease's connection, as a clean-up that Close waits for, and frees the
// row through another connection if that fails.
func (s *session) ended() {
	s.forget()
	first := true
	look := func(ctx context.Context) background.Outcome {
		if first {
			first = false
			if s.dispose(ctx) {
				return background.Cleaned
			}
		}
		return s.m.c.lookAgain(ctx, s.Key(), s.Token(), 0)
	}
	if !s.m.c.bg.Clean(look) {
		go s.dispose(context.Background())
	}
}

// dispose releases the row and the GET_LOCK lock on the lease's
// connection, within disposeTimeout; if that fails, the connection is
// closed, which frees the GET_LOCK lock. It reports whether the row is
// done with: released, here or by Release, or left to expire because the
// lease ended with its session (the database may have ended it unheard by
// the holder, who counts on the lease until its Until).
func (s *session) dispose(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, disposeTimeout)
	defer cancel()
	_, err := s.unlock(ctx)
	s.mu.Lock()
	dropped := s.dropped
	s.mu.Unlock()
	return err == nil || errors.Is(err, errEnded) && !dropped || errors.Is(s.Err(), ErrSessionLost)
}

// watch starts the goroutine that checks the connection every check
// interval, until the lease ends.
func (s *session) watch() {
	go func() {
		t := time.NewTicker(s.m.cfg.checkEvery())
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			if err := s.check(); err != nil {
				if !errors.Is(err, errEnded) {
					s.End(dlock.Lost(sessionLost(err)))
				}
				return
			}
		}
	}()
}

// check pings the lease's connection, waiting no later than Until. On
// failure it closes the connection, which makes sure the GET_LOCK lock
// goes.
func (s *session) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return errEnded
	}
	ctx, cancel := context.WithDeadline(context.Background(), s.Until())
	defer cancel()
	err := s.conn.PingContext(ctx)
	if err != nil {
		discard(s.conn)
		s.conn = nil
		if ctx.Err() != nil {
			// No answer by Until: the lease ends then by itself, for
			// whatever reason it does (expiry, its maximum hold), and
			// its row is freed through the pool (see dispose).
			s.dropped = true
			return errEnded
		}
	}
	return err
}

// confirm extends the row, on the lease's connection, to the TTL from
// now, if the row is the lease's and the session holds the GET_LOCK lock.
// It returns when the request was sent, and errNotHeld if the row is not
// the lease's any more. On any other failure it closes the connection,
// which makes sure the GET_LOCK lock goes.
func (s *session) confirm(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return time.Time{}, errEnded
	}
	start := time.Now()
	name, token, lock := s.m.name, s.Token(), s.m.lockName
	res, err := s.conn.ExecContext(ctx, fill(s.m.c.sql.sessionRefresh, name, token, lock, s.m.cfg.ttlMicros()))
	if err == nil {
		if n, _ := res.RowsAffected(); n != 1 {
			// Not extended: the row is not ours, the GET_LOCK lock is not
			// the session's, or the expiry did not change.
			var row, locked bool
			err = s.conn.QueryRowContext(ctx, fill(s.m.c.sql.sessionCheck, name, token, lock)).Scan(&row, &locked)
			switch {
			case err != nil:
			case !row:
				return start, errNotHeld
			case !locked:
				err = fmt.Errorf("connection %d does not hold GET_LOCK lock %s (a proxy that does not pin sessions?)", s.id, lock)
			}
		}
	}
	if err != nil {
		discard(s.conn)
		s.conn = nil
		s.dropped = ctx.Err() != nil
		return start, err
	}
	return start, nil
}

// extend confirms the lease and extends it to the TTL from the moment it
// asked. It reports whether the lease is still held.
func (s *session) extend(ctx context.Context) bool {
	ctx, cancel := context.WithDeadline(ctx, s.Until()) // past Until, the lease has ended anyway
	defer cancel()
	start, err := s.confirm(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// No answer by Until (or the Client is closing): the lease ends
		// at Until by itself, as expired, and its row is freed through
		// the pool (see dispose). Wait for that, so that a Refresh
		// reports it.
		select {
		case <-s.Done():
		case <-time.After(time.Until(s.Until()) + 50*time.Millisecond):
		}
	case err == nil:
		return s.Extend(lease.Validity(start, s.m.cfg.ttl))
	case errors.Is(err, errNotHeld):
		lose(s, dlock.Lost(dlock.ErrTakenOver))
	case !errors.Is(err, errEnded):
		lose(s, dlock.Lost(sessionLost(err)))
	}
	return false
}

// renew is the watchdog's renewal: it returns when to renew next, or the
// zero time to stop.
func (s *session) renew(ctx context.Context) time.Time {
	if s.extend(ctx) {
		return time.Now().Add(s.m.cfg.ttl / 3)
	}
	return time.Time{}
}

// Refresh confirms that the session still holds the lock and extends the
// lease to a full TTL from now. If ctx is done first, Refresh returns its
// error while the confirmation goes on, by Until at the latest, so that a
// short ctx does not cost the lock (an interrupted statement would close
// the connection).
func (s *session) Refresh(ctx context.Context) error {
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
		return fmt.Errorf("mysqllock: refresh of %q: %w (the confirmation goes on; the lease stands unless it fails)", s.Key(), ctx.Err())
	}
}

// Release frees the row, lets go of the GET_LOCK lock, restores the
// session's wait_timeout, wakes the Client's waiters and gives the
// connection back to the pool. If that fails, it closes the connection
// instead, which frees the GET_LOCK lock, and frees the row through
// another connection, in the background if need be. A holder that
// releases a lease whose session has ended frees its row the same way:
// it is done with it, and the row would otherwise stay held until it
// expires.
func (s *session) Release(ctx context.Context) error {
	if ended, err := s.Ended(true); ended {
		s.letGo(err)
		return err
	}
	s.m.c.renew.Remove(&s.entry)
	freed, err := s.unlock(ctx)
	switch {
	case errors.Is(err, errEnded): // ended as Release began
	case err != nil && !isServerError(err):
		// The connection failed (the database may have ended the session
		// before the release reached it): it is closed now, and the
		// GET_LOCK lock with it. Free the row, if it is still ours,
		// through the pool.
		freed, perr := s.m.c.release(ctx, s.Key(), s.Token())
		switch {
		case perr == nil && freed:
			s.End(dlock.ErrReleased)
		case perr == nil:
			s.End(dlock.Lost(sessionLost(err)))
		default:
			s.m.c.abandon(s.Key(), s.Token(), 0)
			if s.End(dlock.ErrReleased) {
				return fmt.Errorf("mysqllock: release of %q did not complete (its connection is closed, which frees the GET_LOCK lock, and the row is freed in the background; at worst it expires within its TTL): %w",
					s.Key(), s.m.c.describe("releasing", s.Key(), errors.Join(err, perr)))
			}
		}
	case err != nil:
		s.m.c.abandon(s.Key(), s.Token(), 0)
		if s.End(dlock.ErrReleased) {
			return fmt.Errorf("mysqllock: release of %q failed (its connection is closed instead, which frees the GET_LOCK lock, and the row is freed in the background; at worst it expires within its TTL): %w",
				s.Key(), s.m.c.describe("releasing", s.Key(), err))
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
func (s *session) letGo(err error) {
	if errors.Is(err, ErrSessionLost) {
		s.m.c.abandon(s.Key(), s.Token(), 0)
	}
}

// unlock frees the row and the GET_LOCK lock on the lease's connection
// and gives the connection back to the pool, or closes it if anything
// failed. It reports whether the row was the lease's.
func (s *session) unlock(ctx context.Context) (freed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return false, errEnded
	}
	res, err := s.conn.ExecContext(ctx, fill(s.m.c.sql.release, s.m.name, s.Token()))
	if err == nil {
		n, _ := res.RowsAffected()
		freed = n == 1
		_, err = s.conn.ExecContext(ctx, fill(s.m.c.sql.sessionUnlock, s.m.lockName, s.before))
	}
	if err == nil {
		s.conn.Close()
	} else {
		discard(s.conn)
	}
	s.conn = nil
	if freed {
		s.m.c.waiters.wake(s.m.name)
	}
	return freed, err
}
