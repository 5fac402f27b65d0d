package redislock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// splitConn runs scripts through one Conn and listens for release notices
// through another, so that a test can fail the pub/sub connection alone.
type splitConn struct {
	redislock.Conn                // scripts
	listen         redislock.Conn // pub/sub
}

func (c splitConn) Listen(onMessage func(string)) redisconn.Listener {
	return c.listen.Listen(onMessage)
}

// silentPubSub returns a Client on d whose scripts go straight to the
// server and whose pub/sub connections go through a fault proxy, and a
// function that makes the connections open so far silent, as a firewall
// that dropped an idle connection leaves it (open, carrying nothing).
// With fresh set, connections made afterwards go through a second proxy
// that works; otherwise they are silent too.
func silentPubSub(t *testing.T, d *deployment, open opener, fresh bool) (*redislock.Client, func()) {
	first, second := testenv.StartProxy(t, d.addrs()[0]), testenv.StartProxy(t, d.addrs()[0])
	var after atomic.Bool
	proxied := *d
	proxied.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		via := first.Addr()
		if after.Load() && fresh {
			via = second.Addr()
		}
		var nd net.Dialer
		return nd.DialContext(ctx, network, via)
	}
	c := redislock.New(splitConn{Conn: open(t, d), listen: open(t, &proxied)})
	t.Cleanup(func() { c.Close() })
	return c, func() {
		after.Store(true)
		first.Blackhole(true)
	}
}

// A waiter whose pub/sub connection has gone silent still polls, as its
// retry strategy says (DefaultRetry: at most 512ms apart), and takes the
// lock soon after it is released. It waited for the confirmation of its
// subscription until its context ended: the lock sat free for the rest of
// the Lock's time.
func TestIntegrationSilentSubscriptionStillPolls(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			name := "silent-pubsub-" + tr.name
			c, silence := silentPubSub(t, d, tr.open, false)
			// The pub/sub connection is up: a wait subscribed through it.
			warm, err := newClient(t, d, tr.open).NewMutex(name + "-warm").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			go func() { time.Sleep(200 * time.Millisecond); warm.Release(ctx) }()
			if l, err := c.NewMutex(name + "-warm").Lock(ctx); err != nil {
				t.Fatal(err)
			} else {
				l.Release(ctx)
			}
			silence()

			held, err := newClient(t, d, tr.open).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				defer cancel()
				l, err := c.NewMutex(name, redislock.WithTTL(time.Minute)).Lock(wctx)
				if err != nil {
					t.Errorf("Lock with a silent pub/sub connection: %v", err)
					got <- time.Time{}
					return
				}
				got <- time.Now()
				l.Release(context.Background())
			}()
			time.Sleep(time.Second) // the waiter waits
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			at := <-got
			if at.IsZero() {
				return
			}
			took := at.Sub(released)
			t.Logf("measured: the lock sat free %v with the waiter's pub/sub connection silent", took.Round(time.Millisecond))
			if took > 512*time.Millisecond+250*time.Millisecond {
				t.Errorf("the waiter took the lock %v after its release; DefaultRetry polls at most 512ms apart", took)
			}
		})
	}
}

// A listener whose connection has gone silent finds it out (a PING that
// is not answered) and subscribes again on a new connection: a waiter
// whose fallback poll is a minute away is woken by a release that comes a
// few seconds later. Before, the notice went into the silent connection,
// and the waiter slept until its poll.
func TestIntegrationListenerReplacesSilentConnection(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			name := "replaced-pubsub-" + tr.name
			c, silence := silentPubSub(t, d, tr.open, true)
			held, err := newClient(t, d, tr.open).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
			got := make(chan time.Time, 1)
			go func() {
				l, err := c.NewMutex(name, redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
					got <- time.Time{}
					return
				}
				got <- time.Now()
				l.Release(context.Background())
			}()
			line := "dlock:{" + name + "}:waiting"
			for n := int64(0); n != 1; time.Sleep(10 * time.Millisecond) { // the waiter is subscribed and in line
				if n, err = d.admin(t).ZCard(ctx, line).Result(); err != nil {
					t.Fatal(err)
				}
			}
			silence()
			time.Sleep(4 * time.Second) // a PING and its timeout, and a new connection
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-got:
				if took := at.Sub(released); !at.IsZero() && took > time.Second {
					t.Errorf("the waiter took the lock %v after its release; want it woken through a new connection", took)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not woken: its notice went into the silent connection")
			}
		})
	}
}

// A Lock on a go-redis client built for tests (no retries, short dial and
// read timeouts, no ContextTimeoutEnabled) waits through a server killed
// and started again, and through a pause, as one on the README's client
// does (the conformance suite's): every failure on the way (connection
// refused, EOF, i/o timeout) is one it waits through. TryLock on the paused
// server returns, within two of the client's ReadTimeouts, an error matching
// dlock.ErrUnavailable and not dlock.ErrNotObtained.
func TestIntegrationFaultsWithTestClient(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	ctx := timeout(t, time.Minute)
	for _, fault := range []struct {
		name string
		do   func() error
	}{
		{"kill and start", func() error {
			if err := srv.Kill(); err != nil {
				return err
			}
			time.Sleep(1500 * time.Millisecond)
			return srv.Restart()
		}},
		{"pause", func() error {
			if err := srv.Pause(); err != nil {
				return err
			}
			time.Sleep(1500 * time.Millisecond)
			return srv.Resume()
		}},
	} {
		t.Run(fault.name, func(t *testing.T) {
			name := "test-client-" + strings.ReplaceAll(fault.name, " ", "-")
			held, err := newClient(t, d, goRedis).NewMutex(name, redislock.WithTTL(2*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := c.NewMutex(name, redislock.WithTTL(2*time.Second)).Lock(ctx)
				if err == nil {
					l.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(200 * time.Millisecond)
			if err := fault.do(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			held.Release(ctx)
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("Lock waiting through the fault: %v", err)
				}
				t.Logf("measured: granted %v after the server was back", time.Since(back).Round(time.Millisecond))
			case <-time.After(10 * time.Second):
				t.Fatal("Lock still waiting 10s after the server was back")
			}
		})
	}
	t.Run("TryLock on a paused server", func(t *testing.T) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		defer srv.Resume()
		start := time.Now()
		_, err := c.NewMutex("test-client-trylock").TryLock(context.Background())
		took := time.Since(start)
		t.Logf("measured: TryLock on a paused server returned after %v: %v", took.Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("TryLock on a paused server = %v; want an error matching ErrUnavailable and not ErrNotObtained", err)
		}
		// One ReadTimeout for the call; one more if it waited behind
		// another call of the client's in flight to the paused server (see
		// goredisconn: calls go out in batches), or for the handshake of a
		// new connection: 1.003s, "i/o timeout", beside a second make test.
		if took > 2*500*time.Millisecond+dlocktest.Slack {
			t.Errorf("TryLock on a paused server took %v; the client's ReadTimeout is 500ms", took)
		}
	})
}
