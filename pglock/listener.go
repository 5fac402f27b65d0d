package pglock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// A listener LISTENs for the Client's release notices on one connection
// of its own, taken from the pool (which then no longer counts it) when
// the first waiter needs it and closed by Client.Close, and wakes the
// waiters of the lock each notice names. While it has no connection,
// waiters rely on their fallback poll; when it gets one, it wakes them
// all, since a release may have gone unheard.
type listener struct {
	c       *Client
	mu      sync.Mutex
	running bool
}

func newListener(c *Client) *listener { return &listener{c: c} }

// wait registers a waiter for the lock called name, starting the listener
// if it is not running. The caller must close the waiter.
func (l *listener) wait(name string) *dblease.Waiter {
	w := l.c.core.Waiters.Wait(name)
	l.mu.Lock()
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		l.c.core.Background.Go(l.run) // refused once the Client is closed; Lock then fails
	}
	return w
}

// reconnectBackoff spaces out the listener's attempts to get a connection.
var reconnectBackoff = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// run listens until ctx, the Client's, is done, getting a new connection
// whenever the last one fails.
func (l *listener) run(ctx context.Context) {
	for n := 1; ; n++ {
		if l.listen(ctx) {
			n = 1
		}
		if ctx.Err() != nil {
			return
		}
		wait, _ := reconnectBackoff.Backoff(n)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// listen takes a connection, LISTENs on it, and wakes waiters as notices
// arrive, until the connection fails or ctx is done. It reports whether it
// got as far as listening.
func (l *listener) listen(ctx context.Context) bool {
	pc, err := l.c.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+l.c.obj.listen); err != nil {
		return false
	}
	l.c.core.Waiters.WakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.c.core.Waiters.Wake(n.Payload)
	}
}
