package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/dblease"
)

// A conn is a connection of the pool that mysqllock has taken for one use.
// Each statement mysqllock runs on it is a transaction of its own, which
// commits when the statement ends, whatever the session's autocommit: a
// session with autocommit off (autocommit=0 in the DSN, or the server's
// default, or init_connect) has it turned on for the use, which commits
// whatever the session had left open, and off again when the connection
// goes back to the pool (see done). Otherwise a grant would stay
// uncommitted, unseen by others and holding the row's lock, until the
// pool closed the connection, which rolls it back.
type conn struct {
	*sql.Conn
	key any // the driver connection, by which sessions knows it
	session
}

// sessions remembers what mysqllock learnt of each driver connection of
// the pool when it first took it (see session). It forgets them all when
// it holds too many: connections come and go.
type sessions struct {
	mu   sync.Mutex
	m    map[any]session
	last string // the server of the session learnt last (see session)
}

// server names the database's server, as the session learnt last found
// it, for dlock.UnavailableError: the *sql.DB does not say where it
// connects.
func (ss *sessions) server() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.last == "" {
		return "mysql (never reached)"
	}
	return ss.last
}

// A session is what mysqllock learnt of a driver connection: the server's
// ID of the connection, whether its session's autocommit is off, and what
// the restart windows need of its server (see gate), which a connection
// cannot outlive.
type session struct {
	id    int64
	off   bool
	ident string    // the server's identity: server_id, hostname and port
	now   int64     // the server's clock then, in microseconds since 1970, UTC
	at    time.Time // the local clock then
	up    int64     // when the server started, on its clock, if asked (with a restart window)

	epoch bool  // since is known
	since int64 // when the server's identity was first recorded, on its clock; 0 if it was the first ever

	server string   // the server, for dlock.UnavailableError: "mysql" and its @@hostname:@@port
	wait   waitHint // how a statement sets its own lock wait (see lockWait)
	waitS  int64    // the lock wait it sets, in seconds
}

// A waitHint is how a statement can set the time it waits for a row's
// lock, innodb_lock_wait_timeout, for itself alone.
type waitHint int

const (
	noHint   waitHint = iota // MySQL before 8.0: it cannot
	setStmt                  // MariaDB: SET STATEMENT innodb_lock_wait_timeout = n FOR ...
	setVarOf                 // MySQL 8.0 and later: the optimizer hint SET_VAR(innodb_lock_wait_timeout = n)
)

// lockWait returns stmt, which begins with its keyword (UPDATE, INSERT),
// made to wait at most dblease.LockWait (or the session's
// innodb_lock_wait_timeout, if it is shorter) for a row's lock that
// another transaction holds, and then to fail with 1205: an attempt so
// failing found the lock held, where waiting on, 50 seconds by default,
// would have outlasted its attempt timeout and looked like a database that
// does not answer. Each attempt's statements that write set it so, in
// the statement itself, on the servers that offer a way (see waitHint):
// no round trip more, and nothing else of the session changes. On
// MariaDB they also run without max_statement_time, which, shorter than
// the lock wait, would cut it short (1969) and make a held lock look like
// a server that does not answer; they end with the lock wait anyway.
func (s session) lockWait(stmt string) string {
	switch s.wait {
	case setStmt:
		return fmt.Sprintf("SET STATEMENT innodb_lock_wait_timeout = %d, max_statement_time = 0 FOR %s", s.waitS, stmt)
	case setVarOf:
		verb, rest, _ := strings.Cut(stmt, " ")
		return fmt.Sprintf("%s /*+ SET_VAR(innodb_lock_wait_timeout = %d) */ %s", verb, s.waitS, rest)
	}
	return stmt
}

const maxSessions = 4096

// conn takes a connection of the pool for one use, and turns its
// session's autocommit on if it is off. Give it back with done, or
// discard it.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	sc, err := c.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var key any
	sc.Raw(func(dc any) error { key = dc; return nil })
	c.sessions.mu.Lock()
	s, ok := c.sessions.m[key]
	c.sessions.mu.Unlock()
	if !ok {
		if s, err = c.learn(ctx, sc); err != nil {
			discard(sc)
			return nil, err
		}
		c.sessions.put(key, s)
	}
	if s.off {
		if _, err := sc.ExecContext(ctx, "SET SESSION autocommit = 1"); err != nil {
			discard(sc)
			return nil, err
		}
	}
	return &conn{Conn: sc, key: key, session: s}, nil
}

// put remembers s as what is known of the driver connection key.
func (ss *sessions) put(key any, s session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil || len(ss.m) >= maxSessions {
		ss.m = make(map[any]session)
	}
	ss.m[key] = s
	ss.last = s.server
}

// learn asks the server, on a connection mysqllock has not used before,
// what a session holds (see session), and commits what the session's
// start left open. How long the server has run is asked only of a Client
// with a restart window (see gate).
func (c *Client) learn(ctx context.Context, sc *sql.Conn) (session, error) {
	var s session
	var uptime int64
	if _, restart := c.core.Cfg.Restart.Spans(0); restart > 0 {
		// SHOW, not information_schema or performance_schema, whose
		// status tables differ between MySQL and MariaDB; asked first,
		// so that the start it gives is, if anything, late.
		var name string
		if err := sc.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Uptime'").Scan(&name, &uptime); err != nil {
			return s, err
		}
	}
	var autocommit int64
	var version, server string
	err := sc.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@SESSION.autocommit, CONCAT_WS('/', @@server_id, @@hostname, @@port), "+nowMicros+
		", VERSION(), CONCAT(@@hostname, ':', @@port), @@SESSION.innodb_lock_wait_timeout").
		Scan(&s.id, &autocommit, &s.ident, &s.now, &version, &server, &s.waitS)
	s.server = "mysql " + server
	s.wait, s.waitS = hintFor(version), min(s.waitS, int64(dblease.LockWait/time.Second))
	// Uptime is the difference of two readings of the clock in whole
	// seconds, the statement's start and the server's, each rounded
	// down: the server may have started up to a second later than now
	// less Uptime. The start taken is the latest it can have been.
	s.off, s.at = autocommit == 0, time.Now()
	s.up = s.now - (uptime-1)*int64(time.Second/time.Microsecond)
	if err == nil && !s.off {
		// init_connect may have begun a transaction (START TRANSACTION),
		// which autocommit, on, does not end: mysqllock's statements
		// would run in it, uncommitted, until the pool closed the
		// connection. End it; turning autocommit on (see conn) commits
		// one too.
		_, err = sc.ExecContext(ctx, "COMMIT")
	}
	return s, err
}

// hintFor returns how a statement of a server of version (VERSION()) can
// set its own lock wait.
func hintFor(version string) waitHint {
	if strings.Contains(version, "MariaDB") {
		return setStmt
	}
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err == nil && n >= 8 {
		return setVarOf
	}
	return noHint
}

// restoreTimeout bounds the statement that turns a session's autocommit
// off again before its connection goes back to the pool.
const restoreTimeout = 2 * time.Second

// done gives the connection back to the pool, with its session's
// autocommit as mysqllock found it; if that fails, it closes the
// connection instead.
func (cn *conn) done(ctx context.Context) {
	if cn.off {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if _, err := cn.ExecContext(ctx, "SET SESSION autocommit = 0"); err != nil {
			discard(cn.Conn)
			return
		}
	}
	cn.Close()
}

// end ends a use of the connection whose last statement returned err: it
// gives the connection back if the session is as it was (the statement
// ran, or the server refused it), and closes it otherwise, since the
// statement may still be on its way.
func (cn *conn) end(ctx context.Context, err error) {
	if err == nil || errors.Is(err, sql.ErrNoRows) || isServerError(err) {
		cn.done(ctx)
	} else {
		discard(cn.Conn)
	}
}

// with runs f on a connection of the pool taken for it (see conn), and
// then gives the connection back, or closes it if f's error says that a
// statement's outcome is not known. It returns f's error.
func (c *Client) with(ctx context.Context, f func(q querier) error) error {
	cn, err := c.conn(ctx)
	if err != nil {
		return err
	}
	err = f(cn)
	cn.end(ctx, err)
	return err
}

// again is with, run again while it fails with a transient error (see
// dblease.Again).
func (c *Client) again(ctx context.Context, f func(q querier) error) error {
	return dblease.Again(ctx, transient, func() error { return c.with(ctx, f) })
}

// gate returns the moment, on the server's clock in microseconds, before
// which the server must not grant a lock of options cfg on cn: the end of
// the restart windows (see WithRestartWindow), or 0 for none. The first
// attempt on a connection records the server's identity in the row named
// ” (no lock has that name), or finds it there, and learns since when it
// has been recorded: a change of identity starts the identity window.
func (c *Client) gate(ctx context.Context, cn *conn, cfg config) (int64, error) {
	identity, restart := cfg.Windows(c.core.Cfg.Restart, time.Microsecond)
	if identity > 0 && !cn.epoch {
		err := dblease.Again(ctx, transient, func() error {
			if _, err := cn.ExecContext(ctx, cn.lockWait(fill(c.sql.epochNote, cn.ident))); err != nil {
				return err
			}
			return cn.QueryRowContext(ctx, c.sql.epochRead).Scan(&cn.since)
		})
		if err != nil {
			return 0, err
		}
		cn.epoch = true
		c.sessions.put(cn.key, cn.session)
	}
	var gate int64
	if identity > 0 && cn.since > 0 {
		gate = cn.since + identity
	}
	if restart > 0 {
		gate = max(gate, cn.up+restart)
	}
	return gate, nil
}

// abstaining returns, if the server is still within a restart window
// ending at gate (see gate), the error of an attempt on lock name that it
// refused, with how long is left, judged by cn's clock reading and the
// time passed since.
func (c *Client) abstaining(cn *conn, name string, gate int64) (time.Duration, error) {
	if gate <= 0 {
		return 0, nil
	}
	now := cn.now + int64(time.Since(cn.at)/time.Microsecond)
	if gate <= now {
		return 0, nil
	}
	left := time.Duration(gate-now) * time.Microsecond
	return left, dblease.Abstaining("mysqllock", name, left)
}
