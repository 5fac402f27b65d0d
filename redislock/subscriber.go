package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
)

// subscriptionLinger is how long a channel stays subscribed after its last
// waiter left, so that a lock under steady contention is not subscribed and
// unsubscribed on every hand-over.
const subscriptionLinger = time.Second

// A subscriber multiplexes one pub/sub connection among all waiters of a
// Client. Channels are reference-counted; a message on a channel wakes
// every shared waiter of it (readers, latch waiters) and one exclusive
// waiter, the one that has waited longest: only one can take a mutex. A channel's SUBSCRIBE and UNSUBSCRIBE never overlap:
// its entry stays in the map, marked leaving, until the UNSUBSCRIBE is done.
type subscriber struct {
	conn Conn
	quit <-chan struct{} // closed when the Client's Close begins: the tasks' calls end

	mu       sync.Mutex
	seq      uint64 // orders exclusive waiters
	l        redisconn.Listener
	chans    map[string]*channel
	sweeping bool
	closed   bool
	stop     chan struct{}
	tasks    sync.WaitGroup // the sweeper and unsubscribes
}

type channel struct {
	name    string
	waiters map[*waiter]struct{}
	ready   chan struct{} // closed once SUBSCRIBE has succeeded or failed
	ok      bool          // subscribed; valid once ready is closed
	leaving bool          // an UNSUBSCRIBE is on its way
	gone    chan struct{} // closed when the entry has left the map
	idle    time.Time     // when the last waiter left

	// A queue channel is this client's own for one lock (see
	// Mutex.lock): releases notify it only when the client is first in
	// the lock's line of waiting clients, and take it out of the line.
	queue  bool
	since  int64  // the client's score in the line: when its waiting began (Unix µs); 0 while no exclusive waiter
	queued bool   // the client is in the line, as far as it knows
	leaveQ func() // takes the client out of the line, for its last waiter leaving without the lock
	passQ  func() // wakes the next client in line, for a notice that found no waiter here
}

// A waiter receives a value on c for a release notice of its channel:
// every notice, or, if it is exclusive, those that wake it in its turn.
type waiter struct {
	c         chan struct{}
	s         *subscriber
	ch        *channel // nil if it never registered
	exclusive bool
	seq       uint64 // when it registered, for exclusive waiters' turns
}

func newSubscriber(conn Conn, quit <-chan struct{}) *subscriber {
	return &subscriber{conn: conn, quit: quit, chans: make(map[string]*channel), stop: make(chan struct{})}
}

// taskContext returns the context of a task's call: it ends after d, or
// when the Client's Close begins.
func (s *subscriber) taskContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// wait registers a waiter on name and makes sure the channel is
// subscribed. If subscribing fails the waiter is still returned; it is then
// woken only by its caller's fallback poll. An exclusive waiter is woken
// only in its turn (see deliver).
func (s *subscriber) wait(ctx context.Context, name string, exclusive bool) *waiter {
	return s.waitIn(ctx, name, exclusive, nil, nil)
}

// waitQueued is wait for an exclusive waiter on a queue channel: this
// client's own channel for one lock, on which a release notifies it when
// it is first in the lock's line of waiting clients. leave takes the
// client out of the line; it runs when the channel's last waiter leaves
// without the lock while the client is in the line.
func (s *subscriber) waitQueued(ctx context.Context, name string, leave, pass func()) *waiter {
	return s.waitIn(ctx, name, true, leave, pass)
}

func (s *subscriber) waitIn(ctx context.Context, name string, exclusive bool, leaveQ, passQ func()) *waiter {
	w := &waiter{c: make(chan struct{}, 1), s: s, exclusive: exclusive}
	// The waiter waits for the server's confirmation of the subscription
	// at most confirmWait: a pub/sub connection that says nothing must not
	// hold up the waiter's polls.
	limit := time.NewTimer(confirmWait)
	defer limit.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return w
		}
		ch := s.chans[name]
		if ch != nil && ch.leaving {
			s.mu.Unlock()
			select {
			case <-ch.gone:
				continue
			case <-ctx.Done():
			case <-limit.C:
			}
			return w
		}
		if ch == nil {
			ch = &channel{name: name, waiters: make(map[*waiter]struct{}), ready: make(chan struct{}), gone: make(chan struct{})}
			s.chans[name] = ch
			if s.l == nil {
				s.l = s.conn.Listen(s.deliver)
			}
			l := s.l
			s.tasks.Go(func() { s.subscribe(l, ch) })
		}
		if leaveQ != nil {
			ch.queue, ch.leaveQ, ch.passQ = true, leaveQ, passQ
			if ch.since == 0 {
				ch.since = time.Now().UnixMicro()
			}
		}
		ch.waiters[w] = struct{}{}
		w.ch = ch
		s.seq++
		w.seq = s.seq
		s.mu.Unlock()

		select {
		case <-ch.ready:
		case <-ctx.Done():
		case <-limit.C:
		}
		return w
	}
}

// confirmWait is how long a new waiter waits for the server to confirm
// its channel's subscription before it goes on: a confirmation takes one
// round trip, and a waiter that goes on without it may miss a notice
// that comes meanwhile, which costs it one poll (see DefaultRetry).
const confirmWait = 250 * time.Millisecond

// subscribe subscribes ch, waiting for the server's confirmation at most
// AttemptTimeout. If that fails, the subscription is undone, and the
// channel's waiters are woken by their polls alone.
func (s *subscriber) subscribe(l redisconn.Listener, ch *channel) {
	ctx, cancel := s.taskContext(AttemptTimeout)
	err := l.Subscribe(ctx, ch.name)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch.ok = err == nil
	close(ch.ready)
	if !ch.ok && !ch.leaving {
		// The SUBSCRIBE may still reach the server: undo it.
		s.leave(ch.name, ch)
	}
}

// leave marks ch as leaving and unsubscribes it in the background; the
// entry leaves the map when the server has answered. s.mu must be held.
func (s *subscriber) leave(name string, ch *channel) {
	ch.leaving = true
	if s.closed { // the connection is closing: nothing to undo
		delete(s.chans, name)
		close(ch.gone)
		return
	}
	l := s.l
	s.tasks.Go(func() {
		ctx, cancel := s.taskContext(AttemptTimeout)
		l.Unsubscribe(ctx, name) // a failure leaves a harmless subscription
		cancel()
		s.mu.Lock()
		if s.chans[name] == ch {
			delete(s.chans, name)
		}
		close(ch.gone)
		s.mu.Unlock()
	})
}

// close unregisters w. The channel stays subscribed for a while, unless
// w won the lock and was its last waiter here: then it is unsubscribed at
// once, so that this client's next wait subscribes again, at the back of
// the order in which Redis delivers release notices. Otherwise the client
// that subscribed first would be woken first, and win, every time.
func (w *waiter) close(won bool) {
	s, ch := w.s, w.ch
	if ch == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(ch.waiters, w)
	if w.exclusive && !won && len(w.c) > 0 {
		// It was woken but leaves without trying: the turn passes on.
		ch.wakeExclusive()
	}
	if ch.queue && !ch.exclusiveWaiters() {
		if ch.queued && !won && !s.closed {
			s.tasks.Go(ch.leaveQ)
		}
		ch.since, ch.queued = 0, false
	}
	if len(ch.waiters) == 0 && won && ch.ok && !ch.leaving && !ch.queue {
		s.leave(ch.name, ch)
		return
	}
	if len(ch.waiters) == 0 {
		ch.idle = time.Now()
		if !s.sweeping && !s.closed {
			s.sweeping = true
			s.tasks.Go(s.sweep)
		}
	}
}

// deliver wakes the waiters of a channel. It is the Listener's callback.
func (s *subscriber) deliver(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.chans[name]; ch != nil {
		ch.queued = false // the release took this client out of the line
		for w := range ch.waiters {
			if !w.exclusive {
				w.wake()
			}
		}
		ch.wakeExclusive()
		if ch.queue && !ch.exclusiveWaiters() && !s.closed {
			// This client's turn came when none of its waiters is left
			// to take it: pass it on.
			s.tasks.Go(ch.passQ)
		}
	}
}

// wakeExclusive wakes the exclusive waiter of ch that has waited longest
// and has no wake-up pending. s.mu must be held.
func (ch *channel) wakeExclusive() {
	var next *waiter
	for w := range ch.waiters {
		if w.exclusive && len(w.c) == 0 && (next == nil || w.seq < next.seq) {
			next = w
		}
	}
	if next != nil {
		next.wake()
	}
}

// exclusiveWaiters reports whether ch has an exclusive waiter. s.mu must
// be held.
func (ch *channel) exclusiveWaiters() bool {
	for w := range ch.waiters {
		if w.exclusive {
			return true
		}
	}
	return false
}

// line returns what an attempt of w, on a queue channel, tells the
// acquire script: the client's score in the line, and what to do if the
// attempt takes the lock: "stay" in the line (other waiters of this client
// remain), "leave" it, or nothing.
func (w *waiter) line() (since int64, onWin string) {
	s, ch := w.s, w.ch
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch == nil || !ch.queue {
		return time.Now().UnixMicro(), ""
	}
	for o := range ch.waiters {
		if o != w && o.exclusive {
			return ch.since, "stay"
		}
	}
	if ch.queued {
		return ch.since, "leave"
	}
	return ch.since, ""
}

// lined records that an attempt of w has put the client in the line (in,
// the attempt failed) or, with others waiting, kept it there.
func (w *waiter) lined(in bool) {
	if w.ch == nil {
		return
	}
	w.s.mu.Lock()
	w.ch.queued = in
	w.s.mu.Unlock()
}

func (w *waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// sweep unsubscribes channels that have had no waiter for the linger time.
func (s *subscriber) sweep() {
	t := time.NewTicker(subscriptionLinger / 2)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for name, ch := range s.chans {
			if len(ch.waiters) == 0 && !ch.leaving && ch.ok && time.Since(ch.idle) >= subscriptionLinger {
				s.leave(name, ch)
			}
		}
		s.mu.Unlock()
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	l := s.l
	s.mu.Unlock()
	close(s.stop)
	s.tasks.Wait()
	if l != nil {
		return l.Close()
	}
	return nil
}
