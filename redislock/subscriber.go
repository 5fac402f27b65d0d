package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"
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

	mu       sync.Mutex
	seq      uint64 // orders exclusive waiters
	l        transport.Listener
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

func newSubscriber(conn Conn) *subscriber {
	return &subscriber{conn: conn, chans: make(map[string]*channel), stop: make(chan struct{})}
}

// wait registers a waiter on name and makes sure the channel is
// subscribed. If subscribing fails the waiter is still returned; it is then
// woken only by its caller's fallback poll. An exclusive waiter is woken
// only in its turn (see deliver).
func (s *subscriber) wait(ctx context.Context, name string, exclusive bool) *waiter {
	w := &waiter{c: make(chan struct{}, 1), s: s, exclusive: exclusive}
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
				return w
			}
		}
		subscribe := ch == nil
		if subscribe {
			ch = &channel{name: name, waiters: make(map[*waiter]struct{}), ready: make(chan struct{}), gone: make(chan struct{})}
			s.chans[name] = ch
			if s.l == nil {
				s.l = s.conn.Listen(s.deliver)
			}
		}
		ch.waiters[w] = struct{}{}
		w.ch = ch
		s.seq++
		w.seq = s.seq
		l := s.l
		s.mu.Unlock()

		if !subscribe {
			select {
			case <-ch.ready:
			case <-ctx.Done():
			}
			return w
		}
		err := l.Subscribe(ctx, name)
		s.mu.Lock()
		ch.ok = err == nil
		close(ch.ready)
		if !ch.ok {
			// The SUBSCRIBE may still reach the server: undo it.
			s.leave(name, ch)
		}
		s.mu.Unlock()
		return w
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
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
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
	if len(ch.waiters) == 0 && won && ch.ok && !ch.leaving {
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
		for w := range ch.waiters {
			if !w.exclusive {
				w.wake()
			}
		}
		ch.wakeExclusive()
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
