package pglock

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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A session is a SessionMutex's lease: the lock's row holds its token,
// and its connection's session holds the advisory lock.
//
// Between uses, a goroutine waits on the connection for anything the
// database sends, as a listener would: a session that the database ends
// (pg_terminate_backend, idle_session_timeout, a shutdown) says so with a
// FATAL error before it closes the connection, and a broken connection
// fails the read. Either ends the lease at once. The row stays held until
// it expires, no sooner than the lease's Until, unless the holder
// releases it: the database may end a session without its holder
// hearing. A use of the connection (a confirmation, the release) stops
// that goroutine first, and starts it again after.
type session struct {
	*lease.State
	m      *SessionMutex
	entry  renewal.Entry
	pid    uint32 // the backend that took the lock
	before string // the idle_session_timeout to restore on release

	mu      sync.Mutex    // held while the connection is in use
	conn    *pgxpool.Conn // nil once given back to the pool
	unwatch context.CancelFunc
	watched chan struct{} // closed when the watching goroutine has returned
}

var _ dlock.Lease = (*session)(nil)

// errEnded is what a use of a session's connection returns once the
// connection has been given back.
var errEnded = errors.New("pglock: the session lease has ended")

// errNotHeld is what a confirmation returns when the row is no longer
// held by the lease's token.
var errNotHeld = errors.New("pglock: the lock's row is not held by the session lease")

// disposeTimeout bounds the release of an advisory lock whose lease ended
// without Release: past it, the connection is closed, which frees it too.
const disposeTimeout = 5 * time.Second

func newSession(ctx context.Context, m *SessionMutex, conn *pgxpool.Conn, pid uint32, before, token string, fence uint64, until time.Time) *session {
	s := &session{m: m, conn: conn, pid: pid, before: before}
	s.State = lease.New(ctx, m.ev, m.name, token, fence, until, s.ended)
	if m.cfg.maxHold > 0 {
		s.CapHold(time.Now().Add(m.cfg.maxHold))
	}
	s.entry.Value = s
	return s
}

// forget stops renewing an ended lease and drops it from the client.
func (s *session) forget() {
	s.m.c.renew.Remove(&s.entry)
	s.m.c.sessions.Remove(s)
}

// ended runs when the lease ends, for whatever reason: unless Release has
// already done so, it releases the row and the advisory lock on the
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

// dispose releases the row and the advisory lock on the lease's
// connection, within disposeTimeout; if that fails, the connection is
// closed, which frees the advisory lock. It reports whether the row is
// done with: released, here or by Release (which gave the connection back
// or closed it, and frees the row itself if it must), or left to expire
// because the lease ended with its session (the database may have ended
// it unheard by the holder, who counts on the lease until its Until).
// Otherwise the row may still hold the lease's token.
func (s *session) dispose(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, disposeTimeout)
	defer cancel()
	_, err := s.unlock(ctx)
	return err == nil || errors.Is(err, errEnded) || errors.Is(s.Err(), ErrSessionLost)
}

// watch starts the goroutine that waits on the idle connection.
func (s *session) watch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchLocked()
}

func (s *session) watchLocked() {
	if s.conn == nil || s.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.unwatch, s.watched = cancel, done
	pg := s.conn.Conn().PgConn()
	go func() {
		defer close(done)
		for {
			err := pg.WaitForNotification(ctx)
			switch {
			case ctx.Err() != nil: // stopped for a use of the connection
				return
			case err != nil:
				s.End(dlock.Lost(sessionLost(err)))
				return
			}
		}
	}()
}

// stopWatchLocked stops the watching goroutine, if any, and waits for it.
// The connection stays usable: a cancelled wait for a notification only
// interrupts a read.
func (s *session) stopWatchLocked() {
	if s.unwatch != nil {
		s.unwatch()
		<-s.watched
		s.unwatch = nil
	}
}

// confirm extends the row, on the lease's connection, to the TTL from
// now, and reads its backend's PID: an answer that names the backend
// which took the advisory lock proves that the session was alive, and
// the row still the lease's, when the request was sent. It returns when
// the request was sent, and errNotHeld if the row is not the lease's any
// more. On any other failure it closes the connection, which makes sure
// the advisory lock goes.
func (s *session) confirm(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return time.Time{}, errEnded
	}
	s.stopWatchLocked()
	start := time.Now()
	var pid uint32
	err := s.conn.QueryRow(ctx, s.m.c.sql.sessionRefresh, s.m.name, s.Token(), s.m.cfg.ttlMillis()).Scan(&pid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.watchLocked()
		return start, errNotHeld
	case err == nil && pid != s.pid:
		err = fmt.Errorf("the connection reaches backend %d, not %d, which took the lock (a pooler in transaction mode?)", pid, s.pid)
	}
	if err != nil {
		discard(s.conn)
		s.conn = nil
		return start, err
	}
	s.watchLocked()
	return start, nil
}

// extend confirms the lease and extends it to the TTL from the moment it
// asked. It reports whether the lease is still held.
func (s *session) extend(ctx context.Context) bool {
	ctx, cancel := context.WithDeadline(ctx, s.Until()) // past Until, the lease has ended anyway
	defer cancel()
	start, err := s.confirm(ctx)
	switch {
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
		return fmt.Errorf("pglock: refresh of %q: %w (the confirmation goes on; the lease stands unless it fails)", s.Key(), ctx.Err())
	}
}

// Release frees the row, unlocks the advisory lock, restores the
// session's idle_session_timeout, notifies waiters and gives the
// connection back to the pool. If that fails, it closes the connection
// instead, which frees the advisory lock, and frees the row through
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
	case endedByServer(err):
		// The database had ended the session, and with it the advisory
		// lock, before the release reached it: the message said so.
		s.End(dlock.Lost(sessionLost(err)))
	case pgconn.SafeToRetry(err):
		// The connection was closed before the release was sent (the
		// database ended the session, and the watcher has not said so
		// yet): the advisory lock is gone; free the row, if it is still
		// ours, through the pool.
		if freed, err := s.m.c.release(ctx, s.Key(), s.Token()); err == nil && !freed {
			s.End(dlock.Lost(ErrSessionLost))
			break
		} else if err == nil {
			s.End(dlock.ErrReleased)
			break
		}
		fallthrough
	case err != nil:
		s.m.c.abandon(s.Key(), s.Token(), 0)
		if s.End(dlock.ErrReleased) {
			return fmt.Errorf("pglock: release of %q did not complete (its connection is closed instead, which frees the advisory lock, and the row is freed in the background; at worst it expires within its TTL): %w",
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

// unlock frees the row and the advisory lock on the lease's connection
// and gives the connection back to the pool, or closes it if anything
// failed. It reports whether the row was the lease's.
func (s *session) unlock(ctx context.Context) (freed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return false, errEnded
	}
	s.stopWatchLocked()
	var unlocked bool
	err = s.conn.QueryRow(ctx, s.m.c.sql.sessionRelease, s.m.name, s.Token(), s.m.key, s.before, s.m.c.obj.channel).
		Scan(&freed, &unlocked, nil)
	if err == nil && unlocked {
		s.conn.Release()
	} else {
		discard(s.conn)
	}
	s.conn = nil
	return freed, err
}
