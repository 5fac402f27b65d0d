package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/sqllease"
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
	id  int64 // the server's ID of the connection
	off bool  // the session's autocommit is off: turned on for this use
}

// sessions remembers what mysqllock learnt of each driver connection of
// the pool when it first took it: the server's ID of the connection, and
// whether its session's autocommit is off. It forgets them all when it
// holds too many: connections come and go.
type sessions struct {
	mu sync.Mutex
	m  map[any]session
}

type session struct {
	id  int64
	off bool
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
		var autocommit int64
		if err := sc.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@SESSION.autocommit").Scan(&s.id, &autocommit); err != nil {
			discard(sc)
			return nil, err
		}
		s.off = autocommit == 0
		c.sessions.mu.Lock()
		if c.sessions.m == nil || len(c.sessions.m) >= maxSessions {
			c.sessions.m = make(map[any]session)
		}
		c.sessions.m[key] = s
		c.sessions.mu.Unlock()
	}
	if s.off {
		if _, err := sc.ExecContext(ctx, "SET SESSION autocommit = 1"); err != nil {
			discard(sc)
			return nil, err
		}
	}
	return &conn{Conn: sc, id: s.id, off: s.off}, nil
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
// sqllease.Again).
func (c *Client) again(ctx context.Context, f func(q querier) error) error {
	return sqllease.Again(ctx, transient, func() error { return c.with(ctx, f) })
}
