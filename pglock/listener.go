package pglock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
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
	waiters map[string]map[*waiter]struct{}
	running bool
}

// A waiter is one Lock call waiting for a lock.
type waiter struct {
	l    *listener
	name string
	c    chan struct{} // receives when the lock may have been released
}

func newListener(c *Client) *listener {
	return &listener{c: c, waiters: make(map[string]map[*waiter]struct{})}
}

// wait registers a waiter for the lock called name, starting the listener
// if it is not running. The caller must close the waiter.
func (l *listener) wait(name string) *waiter {
	w := &waiter{l: l, name: name, c: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.waiters[name] == nil {
		l.waiters[name] = make(map[*waiter]struct{})
	}
	l.waiters[name][w] = struct{}{}
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		l.c.bg.Go(l.run) // refused once the Client is closed; Lock then fails
	}
	return w
}

// close unregisters w.
func (w *waiter) close() {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	delete(w.l.waiters[w.name], w)
	if len(w.l.waiters[w.name]) == 0 {
		delete(w.l.waiters, w.name)
	}
}

// wake wakes the waiters of the lock called name, or every waiter if all.
func (l *listener) wake(name string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, ws := range l.waiters {
		if !all && n != name {
			continue
		}
		for w := range ws {
			select {
			case w.c <- struct{}{}:
			default: // already woken
			}
		}
	}
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
	l.wake("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		l.wake(n.Payload, false)
	}
}
