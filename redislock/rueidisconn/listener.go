package rueidisconn

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"

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

func (c conn) Listen(onMessage func(string)) transport.Listener {
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
		if err := dc.Do(ctx, dc.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
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
	return dc.Do(ctx, dc.B().Unsubscribe().Channel(channel).Build()).Error()
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
		<-l.done
	}
	return nil
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
		l.dc = dc
		close(l.connected)
		var chans []string
		for ch := range l.channels {
			chans = append(chans, ch)
		}
		l.mu.Unlock()
		if len(chans) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			dc.Do(ctx, dc.B().Subscribe().Channel(chans...).Build())
			cancel()
		}
		select {
		case <-l.stop:
			dc.Close()
			release()
			return
		case <-broken:
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
