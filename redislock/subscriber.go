package redislock

import (
	"context"
	"sync"
	"time"
)

// subscriptionLinger is how long a channel stays subscribed after its last
// waiter left, so that a lock under steady contention is not subscribed and
// unsubscribed on every hand-over.
const subscriptionLinger = time.Second

// A subscriber multiplexes one pub/sub connection among all waiters of a
// Client. Channels are reference-counted; a message on a channel wakes
// every waiter of it.
type subscriber struct {
	conn Conn

	mu       sync.Mutex
	l        Listener
	chans    map[string]*channel
	sweeping bool
	closed   bool
	stop     chan struct{}
	swept    chan struct{}
}

type channel struct {
	waiters map[*waiter]struct{}
	ready   chan struct{} // closed once subscribed (or failed)
	ok      bool          // subscribed; valid once ready is closed
	idle    time.Time     // when the last waiter left
}

// A waiter receives a value on c for every release notice of its channel.
type waiter struct {
	c    chan struct{}
	s    *subscriber
	name string
}

func newSubscriber(conn Conn) *subscriber {
	return &subscriber{conn: conn, chans: make(map[string]*channel),
		stop: make(chan struct{}), swept: make(chan struct{})}
}

// wait registers a waiter on name and makes sure the channel is
// subscribed. If subscribing fails the waiter is still returned; it is then
// woken only by its caller's fallback poll.
func (s *subscriber) wait(ctx context.Context, name string) *waiter {
	w := &waiter{c: make(chan struct{}, 1), s: s, name: name}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return w
	}
	ch := s.chans[name]
	subscribe := ch == nil
	if subscribe {
		ch = &channel{waiters: make(map[*waiter]struct{}), ready: make(chan struct{})}
		s.chans[name] = ch
		if s.l == nil {
			s.l = s.conn.Listen(s.deliver)
		}
	}
	ch.waiters[w] = struct{}{}
	l := s.l
	s.mu.Unlock()

	if subscribe {
		err := l.Subscribe(ctx, name)
		s.mu.Lock()
		ch.ok = err == nil
		close(ch.ready)
		if !ch.ok && s.chans[name] == ch {
			delete(s.chans, name) // the next waiter tries again
		}
		s.mu.Unlock()
		return w
	}
	select {
	case <-ch.ready:
	case <-ctx.Done():
	}
	return w
}

// close unregisters w. The channel stays subscribed for a while.
func (w *waiter) close() {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chans[w.name]
	if ch == nil {
		return
	}
	delete(ch.waiters, w)
	if len(ch.waiters) == 0 {
		ch.idle = time.Now()
		if !s.sweeping && !s.closed {
			s.sweeping = true
			go s.sweep()
		}
	}
}

// deliver wakes the waiters of a channel. It is the Listener's callback.
func (s *subscriber) deliver(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.chans[name]; ch != nil {
		for w := range ch.waiters {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// sweep unsubscribes channels that have had no waiter for the linger time.
func (s *subscriber) sweep() {
	defer close(s.swept)
	t := time.NewTicker(subscriptionLinger / 2)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var idle []string
		for name, ch := range s.chans {
			if len(ch.waiters) == 0 && isClosed(ch.ready) && time.Since(ch.idle) >= subscriptionLinger {
				delete(s.chans, name)
				if ch.ok {
					idle = append(idle, name)
				}
			}
		}
		l := s.l
		s.mu.Unlock()
		for _, name := range idle {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l.Unsubscribe(ctx, name) // a failure leaves a harmless subscription
			cancel()
		}
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sweeping := s.sweeping
	l := s.l
	s.mu.Unlock()
	close(s.stop)
	if sweeping {
		<-s.swept
	}
	if l != nil {
		return l.Close()
	}
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
