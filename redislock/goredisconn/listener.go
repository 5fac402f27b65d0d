package goredisconn

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/go-redis/v9"
)

// listener runs one go-redis PubSub. go-redis reconnects and resubscribes
// by itself when the connection fails; listener reads it from one
// goroutine, turns subscription confirmations into the return of
// Subscribe, and makes sure that a connection that has gone silent (open,
// but carrying nothing, as after a firewall dropped it) is found out: when
// nothing has come for pingEvery while channels are subscribed, it sends a
// PING, and when the answer does not come within pingEvery more, it closes
// that PubSub and subscribes every channel again on a new one.
type listener struct {
	c         Client
	onMessage func(string)

	mu       sync.Mutex
	ps       *redis.PubSub
	channels map[string]bool // subscribed, or being subscribed
	pending  map[string][]chan struct{}
	closed   bool
	done     chan struct{}
}

// pingEvery is how long a listener's connection may stay silent while
// channels are subscribed before the listener sends a PING; a connection
// that does not answer it within pingEvery more is replaced.
const pingEvery = time.Second

func (c *conn) Listen(onMessage func(string)) redisconn.Listener {
	return &listener{c: c.c, onMessage: onMessage, channels: make(map[string]bool), pending: make(map[string][]chan struct{})}
}

func (l *listener) Subscribe(ctx context.Context, channel string) error {
	confirmed := make(chan struct{})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return redis.ErrClosed
	}
	if l.ps == nil {
		l.ps = l.c.Subscribe(context.WithoutCancel(ctx))
		l.done = make(chan struct{})
		go l.receive(l.ps, l.done)
	}
	l.channels[channel] = true
	l.pending[channel] = append(l.pending[channel], confirmed)
	ps := l.ps
	l.mu.Unlock()
	if err := within(ctx, func() error { return ps.Subscribe(ctx, channel) }); err != nil {
		return err
	}
	select {
	case <-confirmed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *listener) Unsubscribe(ctx context.Context, channel string) error {
	l.mu.Lock()
	delete(l.channels, channel)
	ps := l.ps
	l.mu.Unlock()
	if ps == nil {
		return nil
	}
	return within(ctx, func() error { return ps.Unsubscribe(ctx, channel) })
}

// within runs f, a call on a PubSub, and returns its error, or ctx's if
// ctx ends first: go-redis holds the PubSub's lock while it connects,
// bounded by its DialTimeout and ReadTimeout only, and f waits for it.
func within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeGrace is how long Close waits for the PubSub to close: go-redis
// holds its lock while it connects, bounded by its DialTimeout and
// ReadTimeout only, and a connection to a server that does not answer is
// closed when that ends, without Close waiting for it.
const closeGrace = 100 * time.Millisecond

func (l *listener) Close() error {
	l.mu.Lock()
	l.closed = true
	ps, done := l.ps, l.done
	l.mu.Unlock()
	if ps == nil {
		return nil
	}
	closed := make(chan error, 1)
	go func() {
		err := ps.Close()
		<-done
		closed <- err
	}()
	select {
	case err := <-closed:
		if errors.Is(err, redis.ErrClosed) { // replace closed it as it ended
			err = nil
		}
		return err
	case <-time.After(closeGrace):
		return nil
	}
}

// receive reads ps until the listener is closed, replacing ps (see
// replace) when its connection has gone silent.
func (l *listener) receive(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	pinged := false // a PING is unanswered
	for {
		// ctx bounds the connection's set-up, when there is one to make.
		ctx, cancel := context.WithTimeout(context.Background(), 2*pingEvery)
		msg, err := ps.ReceiveTimeout(ctx, pingEvery)
		cancel()
		if err != nil {
			l.mu.Lock()
			closed, listening := l.closed, len(l.channels) > 0
			l.mu.Unlock()
			if closed {
				return
			}
			var ne net.Error
			switch {
			case !errors.As(err, &ne) || !ne.Timeout():
				time.Sleep(10 * time.Millisecond) // go-redis reconnects on the next Receive
			case pinged:
				if ps = l.replace(ps); ps == nil {
					return
				}
				pinged = false
			case listening:
				pctx, cancel := context.WithTimeout(context.Background(), pingEvery)
				pinged = ps.Ping(pctx) == nil
				cancel()
			}
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			l.onMessage(m.Channel)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				l.mu.Lock()
				for _, c := range l.pending[m.Channel] {
					close(c)
				}
				delete(l.pending, m.Channel)
				l.mu.Unlock()
			}
		}
	}
}

// replace closes old, whose connection did not answer a PING, and
// subscribes every channel again on a new PubSub, which it returns; or nil
// if the listener was closed meanwhile. Messages published while the
// connection was silent are lost.
func (l *listener) replace(old *redis.PubSub) *redis.PubSub {
	old.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	chans := make([]string, 0, len(l.channels))
	for ch := range l.channels {
		chans = append(chans, ch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingEvery)
	defer cancel()
	l.ps = l.c.Subscribe(ctx, chans...) // an error here is retried by the next Receive
	return l.ps
}
