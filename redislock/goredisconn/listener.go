package goredisconn

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"

	"github.com/redis/go-redis/v9"
)

// listener runs one go-redis PubSub. go-redis reconnects and resubscribes
// by itself; listener reads it from one goroutine and turns subscription
// confirmations into the return of Subscribe.
type listener struct {
	c         Client
	onMessage func(string)

	mu      sync.Mutex
	ps      *redis.PubSub
	pending map[string][]chan struct{}
	closed  bool
	done    chan struct{}
}

func (c *conn) Listen(onMessage func(string)) transport.Listener {
	return &listener{c: c.c, onMessage: onMessage, pending: make(map[string][]chan struct{})}
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
	l.pending[channel] = append(l.pending[channel], confirmed)
	ps := l.ps
	l.mu.Unlock()
	if err := ps.Subscribe(ctx, channel); err != nil {
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
	ps := l.ps
	l.mu.Unlock()
	if ps == nil {
		return nil
	}
	return ps.Unsubscribe(ctx, channel)
}

func (l *listener) Close() error {
	l.mu.Lock()
	l.closed = true
	ps, done := l.ps, l.done
	l.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

func (l *listener) receive(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	ctx := context.Background()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond) // go-redis reconnects on the next Receive
			continue
		}
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
