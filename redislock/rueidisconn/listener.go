package rueidisconn

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/rueidis"
)

// listener keeps one dedicated rueidis connection with pub/sub hooks. One
// goroutine owns it: when it breaks, the goroutine dedicates a new one and
// resubscribes every channel.
type listener struct {
	c         rueidis.Client
	onMessage func(string)

	mu        sync.Mutex
	dc        rueidis.DedicatedClient // nil while (re)connecting
	connected chan struct{}           // closed when dc is set
	channels  map[string]bool
	pending   map[string][]chan struct{}
	started   bool
	closed    bool
	stop      chan struct{}
	done      chan struct{}
}

func (c conn) Listen(onMessage func(string)) redisconn.Listener {
	return &listener{c: c.c, onMessage: onMessage, connected: make(chan struct{}),
		channels: make(map[string]bool), pending: make(map[string][]chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (l *listener) Subscribe(ctx context.Context, channel string) error {
	confirmed := make(chan struct{})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return rueidis.ErrClosing
	}
	if !l.started {
		l.started = true
		go l.run()
	}
	l.channels[channel] = true
	l.pending[channel] = append(l.pending[channel], confirmed)
	connected := l.connected
	l.mu.Unlock()

	select {
	case <-connected:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	dc := l.dc
	l.mu.Unlock()
	if dc != nil {
		if err := within(ctx, func() error { return dc.Do(ctx, dc.B().Subscribe().Channel(channel).Build()).Error() }); err != nil {
			return err
		}
	} // else: the connection broke meanwhile; run resubscribes
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
	dc := l.dc
	l.mu.Unlock()
	if dc == nil {
		return nil
	}
	return within(ctx, func() error { return dc.Do(ctx, dc.B().Unsubscribe().Channel(channel).Build()).Error() })
}

func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	started := l.started
	l.mu.Unlock()
	close(l.stop)
	if started {
		select {
		case <-l.done:
		case <-time.After(closeGrace):
		}
	}
	return nil
}

// closeGrace is how long Close waits for the connection to close: rueidis
// bounds the making of a connection by its Dialer's timeout only, and
// holds up the calls on it meanwhile; a connection made after Close is
// closed at once, without Close waiting for it.
const closeGrace = 100 * time.Millisecond

// within runs f, a call on the dedicated connection, and returns its
// error, or ctx's if ctx ends first: rueidis connects a dedicated Cluster
// client on its first call, and holds up the call while it connects.
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

func (l *listener) run() {
	defer close(l.done)
	hooks := rueidis.PubSubHooks{
		OnMessage:      func(m rueidis.PubSubMessage) { l.onMessage(m.Channel) },
		OnSubscription: l.confirm,
	}
	for {
		dc, release := l.c.Dedicate()
		broken := dc.SetPubSubHooks(hooks)
		l.mu.Lock()
		if l.closed { // a connection made after Close
			l.mu.Unlock()
			dc.Close()
			release()
			return
		}
		l.dc = dc
		close(l.connected)
		var chans []string
		for ch := range l.channels {
			chans = append(chans, ch)
		}
		l.mu.Unlock()
		if len(chans) > 0 {
			ctx, cancel := l.bounded(5 * time.Second)
			dc.Do(ctx, dc.B().Subscribe().Channel(chans...).Build())
			cancel()
		}
		if !l.watch(dc, broken) {
			dc.Close()
			release()
			return
		}
		l.mu.Lock()
		l.dc = nil
		l.connected = make(chan struct{})
		l.mu.Unlock()
		dc.Close()
		release()
		select {
		case <-l.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pingEvery is how often the listener PINGs its connection while channels
// are subscribed; a connection that does not answer within pingEvery is
// closed, and a new one subscribes every channel again. rueidis finds a
// dead connection by itself too, but only after ConnWriteTimeout (ten
// seconds by default).
const pingEvery = time.Second

// watch waits until dc breaks, or is found silent and closed, and reports
// true; or until the listener is closed, and reports false.
func (l *listener) watch(dc rueidis.DedicatedClient, broken <-chan error) bool {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return false
		case <-broken:
			return true
		case <-t.C:
		}
		l.mu.Lock()
		listening := len(l.channels) > 0
		l.mu.Unlock()
		if !listening {
			continue
		}
		ctx, cancel := l.bounded(pingEvery)
		err := dc.Do(ctx, dc.B().Ping().Build()).Error()
		cancel()
		if err != nil && !rueidis.IsRedisNil(err) {
			if _, reply := rueidis.IsRedisErr(err); !reply {
				dc.Close() // broken follows
			}
		}
	}
}

// bounded returns a context that ends after d, or when the listener is
// closed.
func (l *listener) bounded(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (l *listener) confirm(s rueidis.PubSubSubscription) {
	if s.Kind != "subscribe" {
		return
	}
	l.mu.Lock()
	for _, c := range l.pending[s.Channel] {
		close(c)
	}
	delete(l.pending, s.Channel)
	l.mu.Unlock()
}
