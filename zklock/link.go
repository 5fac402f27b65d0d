package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// A link is one go-zookeeper connection, which carries one session at a
// time. A Client uses one link at a time, and replaces it when it gives
// up a session that no server takes back (see giveUpSession).
type link struct {
	conn     *zk.Conn
	ready    chan struct{} // closed at the connection's first session
	loopDone chan struct{} // closed when the connection has stopped
	// dialCtx is cancelled by close, to cut short a TLS handshake.
	dialCtx  context.Context
	stopDial context.CancelFunc
	// abandoned: the Client gave up its session; its events are ignored.
	// Guarded by the Client's mu.
	abandoned bool
	calls     inflight // the Client's calls under way on conn

	mu  sync.Mutex
	tcp net.Conn // the connection's current socket, if any
	cut bool     // the socket was closed for good: dial no more
}

// dial opens a connection to the Client's servers. Its events count
// once it is installed.
func (s *Client) dial() (*link, error) {
	l := &link{ready: make(chan struct{}), loopDone: make(chan struct{})}
	l.dialCtx, l.stopDial = context.WithCancel(context.Background())
	var once bool // touched only on the connection's goroutine
	conn, events, err := zk.Connect(s.servers, s.cfg.timeout, zk.WithDialer(s.dialer(l)),
		zk.WithLogger(zkLogger{s}), zk.WithLogInfo(true), zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession && !once {
				once = true
				close(l.ready)
			}
			s.onEvent(l, ev)
		}))
	if err != nil {
		l.stopDial()
		return nil, err
	}
	l.conn = conn
	go func() {
		for range events { // the callback sees them all; this channel drops when full
		}
		close(l.loopDone)
	}()
	return l, nil
}

// drainTimeout bounds close's wait for the calls under way on a link.
const drainTimeout = time.Second

// close closes the connection, cutting short a handshake under way. It
// does not wait for the connection to stop: see loopDone.
//
// go-zookeeper's Close makes the calls under way return at once, while
// its reader may still be decoding a reply into one of them (a data
// race). So close refuses new calls and, on a connection with a session,
// waits for those under way, for up to wait (and drainTimeout at most),
// so that Close still ends the session gracefully. A connection without a
// session, or with calls still waiting by then (a silent server), has its
// socket closed first, and close waits for the reader to stop before
// Close.
func (l *link) close(wait time.Duration) {
	l.stopDial()
	drained := l.calls.drain()
	if l.conn.State() != zk.StateHasSession {
		l.cutSocket()
	} else {
		select {
		case <-drained:
		case <-time.After(min(max(wait, 0), drainTimeout)):
			l.cutSocket()
		}
	}
	l.conn.Close()
}

// cutSocket closes l's socket for good (the dialer refuses from now on)
// and waits, for up to drainTimeout, until go-zookeeper's reader has
// stopped: it stops before the connection leaves StateHasSession.
func (l *link) cutSocket() {
	l.mu.Lock()
	l.cut = true
	if l.tcp != nil {
		l.tcp.Close()
	}
	l.mu.Unlock()
	for deadline := time.Now().Add(drainTimeout); l.conn.State() == zk.StateHasSession && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// adopt makes c l's current socket, or closes it and reports false if
// l's socket was cut.
func (l *link) adopt(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		c.Close()
		return false
	}
	l.tcp = c
	return true
}

// onLink runs op on l's connection, unless l is closing: then it returns
// zk.ErrClosing, as go-zookeeper does on a closed connection.
func onLink[T any](l *link, op func(c *zk.Conn) (T, error)) (T, error) {
	if !l.calls.begin() {
		var zero T
		return zero, zk.ErrClosing
	}
	defer l.calls.end()
	return op(l.conn)
}

// install makes l the Client's connection, and takes on its state: its
// events before now were ignored.
func (s *Client) install(l *link) {
	s.mu.Lock()
	s.link.Store(l)
	ended := s.applyLocked(l, l.conn.State())
	s.mu.Unlock()
	s.afterApply(ended)
}

// zk returns the connection in use.
func (s *Client) zk() *zk.Conn { return s.link.Load().conn }

// onEvent maps the session events of connection l to lease state. It runs
// on l's goroutine, which logs the negotiated timeout after
// StateHasSession and before it sends any request; it must not wait for
// that goroutine.
func (s *Client) onEvent(l *link, ev zk.Event) {
	s.mu.Lock()
	current := s.link.Load() == l && !l.abandoned
	var ended int64
	if current && ev.Type == zk.EventSession {
		ended = s.applyLocked(l, ev.State)
	}
	s.mu.Unlock()
	if !current {
		return // a connection not yet installed, or given up
	}
	if s.cfg.onEvent != nil {
		s.cfg.onEvent(ev)
	}
	s.afterApply(ended)
}

// applyLocked applies state, the state of l (the current link), to the
// Client. It returns the ID of a session that has ended, or 0. s.mu
// must be held.
func (s *Client) applyLocked(l *link, state zk.State) (ended int64) {
	switch state {
	case zk.StateHasSession:
		id := l.conn.SessionID()
		if s.id != 0 && s.id != id {
			ended = s.id
		}
		s.id, s.suspended = id, false
		s.lostConn = time.Time{}
		s.stopGiveUpLocked()
		s.readyOnce.Do(func() { close(s.ready) })
	case zk.StateDisconnected, zk.StateConnecting, zk.StateConnected:
		if s.lostConn.IsZero() {
			s.lostConn = time.Now()
		}
		s.suspended = s.id != 0
		if s.suspended && s.giveUp == nil && !s.closed {
			id, timeout := s.id, s.timeoutLocked()
			s.giveUp = time.AfterFunc(timeout, func() { s.giveUpSession(l, id, timeout) })
		}
	case zk.StateExpired:
		if s.lostConn.IsZero() {
			s.lostConn = time.Now()
		}
		ended = s.id
		s.id, s.suspended = 0, false
		s.stopGiveUpLocked()
	}
	return ended
}

// afterApply ends the leases of session ended, if any: the ensemble has
// expired it or the connection carries another.
func (s *Client) afterApply(ended int64) {
	if ended != 0 {
		s.sessionEnded(ended, ErrSessionExpired, false)
	}
}

// stopGiveUpLocked cancels the pending give-up, if any. s.mu must be held.
func (s *Client) stopGiveUpLocked() {
	if s.giveUp != nil {
		s.giveUp.Stop()
		s.giveUp = nil
	}
}

// errSessionAbandoned is the cause wrapped in dlock.ErrLost for the leases
// of a session that no server took back within the session timeout.
var errSessionAbandoned = fmt.Errorf("%w: no server took the session back within the session timeout (an ensemble restarted without its data refuses it for ever); the Session started a new one", ErrSessionExpired)

// giveUpSession gives up session id, whose connection l has been down
// for the session timeout: any ensemble that is up has expired it by now
// (it had not heard from the client for as long), and an ensemble that
// lost its data refuses it for ever ("has seen zxid ..., our last zxid is
// ..."), without ever reporting it expired. As Curator does, the Client
// ends the session's leases (each had ended by its Until already), opens
// a new connection, installs it once it has a session (and the
// credentials of WithDigestAuth), and closes l. The nodes of the old
// session that it knows of are deleted in the background, in case an
// ensemble that was down comes back with them.
func (s *Client) giveUpSession(l *link, id int64, timeout time.Duration) {
	s.mu.Lock()
	if s.closed || s.link.Load() != l || s.id != id || !s.suspended {
		s.mu.Unlock()
		return // the session came back, expired, or the Client is closing
	}
	s.giveUp = nil
	l.abandoned = true
	s.id, s.suspended = 0, false
	s.retiring.Add(1)
	s.mu.Unlock()
	defer s.retiring.Done()
	s.cfg.log.Warn("zklock: no ZooKeeper server took the session back within the session timeout; starting a new session",
		"session", fmt.Sprintf("%#x", id), "timeout", timeout, "servers", s.servers)
	s.sessionEnded(id, errSessionAbandoned, true)
	for n := 1; ; n++ {
		nl := s.redial()
		if nl != nil {
			s.install(nl)
			break
		}
		d, _ := retryBackoff.Backoff(n)
		select {
		case <-s.closing:
			l.close(drainTimeout)
			<-l.loopDone
			return
		case <-time.After(d):
		}
	}
	l.close(drainTimeout)
	<-l.loopDone
}

// redial opens a new connection and returns it once it has a session and
// has sent WithDigestAuth's credentials; or returns nil after closing it,
// if that fails or the Client is closing.
func (s *Client) redial() *link {
	nl, err := s.dial()
	if err != nil {
		s.cfg.log.Warn("zklock: cannot open a new connection", "servers", s.servers, "err", err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	ok := false
	select {
	case <-nl.ready:
		ok = true
		for _, cred := range s.cfg.auth {
			if _, err := await(ctx, func() (struct{}, error) {
				return onLink(nl, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.AddAuth("digest", []byte(cred)) })
			}); err != nil {
				s.cfg.log.Warn("zklock: digest authentication on a new connection failed", "servers", s.servers, "err", err)
				ok = false
				break
			}
		}
	case <-ctx.Done():
	}
	if !ok {
		nl.close(drainTimeout)
		<-nl.loopDone
		return nil
	}
	return nl
}

// retiredErr turns zk.ErrClosing, the answer of a connection closed under
// a call, into zk.ErrConnectionClosed while the Client is open: the
// Client replaced the connection, and the call may be repeated on the
// new one.
func (s *Client) retiredErr(err error) error {
	if errors.Is(err, zk.ErrClosing) && !s.leases.Closed() {
		return zk.ErrConnectionClosed
	}
	return err
}

// call runs op on the Client's connection, bounded by ctx as await does.
func call[T any](ctx context.Context, s *Client, op func(c *zk.Conn) (T, error)) (T, error) {
	l := s.link.Load()
	return await(ctx, func() (T, error) {
		v, err := onLink(l, op)
		return v, s.retiredErr(err)
	})
}
