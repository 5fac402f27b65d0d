package zklock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connErrors remembers the last error met while connecting to a server or
// talking to it, and the TLS handshake under way, so that New, when ctx is
// done before any server grants a session, can say why rather than only
// that time ran out: go-zookeeper tries the servers in turn for ever and
// reports no error.
type connErrors struct {
	mu   sync.Mutex
	last error
	// shaking is the server whose TLS handshake is under way, since
	// shakeBegan; "" for none.
	shaking    string
	shakeBegan time.Time
}

// handshaking records the start of a TLS handshake with addr, and
// returns the function that records its end.
func (e *connErrors) handshaking(addr string) (done func()) {
	e.mu.Lock()
	e.shaking, e.shakeBegan = addr, time.Now()
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.shaking = ""
		e.mu.Unlock()
	}
}

// underWay describes the TLS handshake under way, or returns "".
func (e *connErrors) underWay() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shaking == "" {
		return ""
	}
	return fmt.Sprintf("TLS handshake with %s under way for %v", e.shaking, time.Since(e.shakeBegan).Round(time.Millisecond))
}

func (e *connErrors) set(err error) {
	e.mu.Lock()
	e.last = err
	e.mu.Unlock()
}

func (e *connErrors) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// dialer returns the go-zookeeper dialer of link l: a TCP connection,
// with TLS on top under WithTLS, whose failures, and the read and write
// errors of the connection it returns, are remembered in s.connErr. A
// handshake takes at most the session timeout, and is cut short when l
// is closed.
func (s *Client) dialer(l *link) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			s.connErr.set(fmt.Errorf("connecting to %s: %w", addr, err))
			return nil, err
		}
		if s.cfg.tls != nil {
			if c, err = s.handshake(l.dialCtx, c, addr); err != nil {
				s.connErr.set(err)
				return nil, err
			}
		}
		if !l.adopt(c) {
			return nil, errLinkClosed
		}
		w := &watchedConn{Conn: c, addr: addr, errs: &s.connErr, answerBound: s.cfg.timeout * 2 / 3}
		select {
		case <-l.ready:
			// A session's own reconnect to its only server: cutting a
			// late answer gains nothing (there is no other server to
			// try, and go-zookeeper pauses a second before it dials the
			// same one again) and loses a session the answer would have
			// kept. The Client gives the session up a session timeout
			// after it lost its connection anyway, and closes this one.
			if len(s.servers) == 1 {
				w.answerBound = 0
			}
		default:
		}
		return w, nil
	}
}

// errLinkClosed is the dialer's answer once its link was closed.
var errLinkClosed = errors.New("zklock: connection closed")

// handshake runs the TLS handshake with server addr over c. Unless the
// configuration names a server, the certificate must be valid for addr's
// host, as with tls.Dial.
func (s *Client) handshake(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	cfg := s.cfg.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	defer s.connErr.handshaking(addr)()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			// A plain client port reads the ClientHello as a request too
			// long, and hangs up.
			return nil, fmt.Errorf("TLS handshake with %s: %w (the server hung up: is that its secure client port?)", addr, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// A watchedConn remembers its read and write errors. With TLS 1.3 a
// server that rejects the client's certificate says so only after the
// client's handshake has completed, in an alert met by the first read.
//
// It also bounds the wait for the answer to the session's connect
// request by answerBound, the bound go-zookeeper puts on every later
// read (two thirds of the session timeout). go-zookeeper itself waits ten
// times as long (20s for a 3s session, 67s for the default 10s): a
// ZooKeeper server that accepts a connection while it starts and never
// answers it (measured at load 40: a restarted server, serving again
// 4.5s later, left a connection accepted before then unanswered) kept a
// Client from its servers, and a Lock waiting through the restart, for
// 16.8s after the server was back. A session's reconnect to the only
// server a Client has is not bounded (see dialer).
type watchedConn struct {
	net.Conn
	addr        string
	errs        *connErrors
	answerBound time.Duration
	answered    atomic.Bool // the connect request's answer was read
}

// SetReadDeadline bounds the first read, that of the connect request's
// answer, by answerBound; go-zookeeper clears the deadline once it has
// read it.
func (c *watchedConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		c.answered.Store(true)
	} else if !c.answered.Load() && c.answerBound > 0 {
		if bound := time.Now().Add(c.answerBound); t.After(bound) {
			t = bound
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.errs.set(fmt.Errorf("reading from %s: %w", c.addr, err))
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.errs.set(fmt.Errorf("writing to %s: %w", c.addr, err))
	}
	return n, err
}
