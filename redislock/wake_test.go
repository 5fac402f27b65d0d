package redislock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// A release wakes one of a client's waiters of a Mutex, not all of them:
// the others would only try, fail and go back to sleep. Each of 8
// goroutines of one client gets the lock in turn, one attempt per
// hand-over.
func TestIntegrationReleaseWakesOneWaiterPerClient(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	holder := newClient(t, d, goRedis).NewMutex("wake-one", redislock.WithTTL(time.Minute))
	first, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingConn{Conn: goRedis(t, d)}
	c := redislock.New(counter)
	t.Cleanup(func() { c.Close() })
	slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
	const waiters = 8
	var wg sync.WaitGroup
	got := make(chan dlock.Lease)
	for range waiters {
		wg.Go(func() {
			l, err := c.NewMutex("wake-one", redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		})
	}
	time.Sleep(500 * time.Millisecond) // every waiter has tried once and waits
	before := counter.calls.Load()
	first.Release(ctx)
	for i := range waiters {
		select {
		case l := <-got:
			l.Release(context.Background())
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d of %d was not woken", i+1, waiters)
		}
	}
	wg.Wait()
	// Per hand-over: one acquire and one release. Waking every waiter
	// costs up to 8 acquires per hand-over instead.
	if calls := counter.calls.Load() - before; calls > 2*waiters+2 {
		t.Errorf("%d script calls for %d hand-overs; want about %d (one acquire and one release each)", calls, waiters, 2*waiters)
	}
}

// A release reaches one waiting client, not every client waiting for the
// name: 8 clients, one waiter each, with a fallback poll of a minute, take
// the lock in turn with one acquire attempt per hand-over beyond the one
// that put each client in line. Waking every client costs up to 8 attempts
// per hand-over instead. The line is gone once every client has had the
// lock. Mutex and ReentrantMutex alike.
func TestIntegrationReleaseWakesOneClient(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, kind := range []struct {
		name string
		lock func(c *redislock.Client, name string, opts ...redislock.Option) dlock.Locker
	}{
		{"Mutex", func(c *redislock.Client, name string, opts ...redislock.Option) dlock.Locker {
			return c.NewMutex(name, opts...)
		}},
		{"ReentrantMutex", func(c *redislock.Client, name string, opts ...redislock.Option) dlock.Locker {
			return c.NewReentrantMutex(name, opts...)
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := timeout(t, time.Minute)
			name, clients := "wake-one-client-"+kind.name, 8
			holder := kind.lock(newClient(t, d, goRedis), name, redislock.WithTTL(time.Minute))
			first, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
			counters := make([]*countingConn, clients)
			got := make(chan dlock.Lease)
			var wg sync.WaitGroup
			for i := range clients {
				counters[i] = &countingConn{Conn: goRedis(t, d)}
				c := redislock.New(counters[i])
				t.Cleanup(func() { c.Close() })
				wg.Go(func() {
					l, err := kind.lock(c, name, redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					got <- l
				})
			}
			time.Sleep(500 * time.Millisecond) // every client has tried and stands in line
			calls := func() (n int64) {
				for _, c := range counters {
					n += c.calls.Load()
				}
				return n
			}
			before := calls()
			first.Release(ctx)
			for i := range clients {
				select {
				case l := <-got:
					l.Release(context.Background())
				case <-time.After(10 * time.Second):
					t.Fatalf("client %d of %d was not woken", i+1, clients)
				}
			}
			wg.Wait()
			// Per hand-over: the woken client's acquire and its release.
			if n := calls() - before; n > 2*int64(clients)+2 {
				t.Errorf("%d script calls for %d hand-overs; want about %d (one acquire and one release each)", n, clients, 2*clients)
			}
			if n, _ := d.admin(t).Exists(ctx, "dlock:{"+name+"}:waiting").Result(); n != 0 {
				t.Errorf("the line of waiting clients is still there after every client had the lock")
			}
		})
	}
}

// A release passes over a client that stands first in line but no longer
// listens (it vanished without leaving the line), and wakes the next one
// at once, although that one's fallback poll is a minute away.
func TestIntegrationReleasePassesOverVanishedClient(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	const name = "wake-vanished"
	first, err := newClient(t, d, goRedis).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
	got := make(chan error, 1)
	go func() {
		l, err := newClient(t, d, goRedis).NewMutex(name, redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
		if err == nil {
			l.Release(context.Background())
		}
		got <- err
	}()
	line := "dlock:{" + name + "}:waiting"
	for n := int64(0); n != 1; time.Sleep(10 * time.Millisecond) { // until the waiter stands in line
		if n, err = d.admin(t).ZCard(ctx, line).Result(); err != nil || n > 1 {
			t.Fatalf("the line holds %d clients (%v); want the waiter", n, err)
		}
	}
	// A client that vanished, first in line: it waited since the epoch.
	if err := d.admin(t).ZAdd(ctx, line, redis.Z{Score: 0, Member: "vanished"}).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind a vanished client was not woken")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the waiter took %v to get the lock; want a notice, not a poll", took)
	}
	if n, _ := d.admin(t).Exists(ctx, line).Result(); n != 0 {
		t.Errorf("the line is still there after its clients left")
	}
}

// A client woken when none of its waiters is left to take the lock (its
// waiter gave up as the notice came) passes the turn on to the next client
// in line at once, although that one's fallback poll is a minute away.
func TestIntegrationWokenClientWithoutWaiterPassesTurn(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	const name = "wake-pass"
	first, err := newClient(t, d, goRedis).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// gone waits a moment and gives up; it keeps listening on its channel
	// for a while (subscriptions linger), with no waiter.
	gone := newClient(t, d, goRedis)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = gone.NewMutex(name, redislock.WithTTL(time.Minute)).Lock(wctx)
	cancel()
	if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("the waiter that gives up got %v", err)
	}
	slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
	got := make(chan error, 1)
	go func() {
		l, err := newClient(t, d, goRedis).NewMutex(name, redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
		if err == nil {
			l.Release(context.Background())
		}
		got <- err
	}()
	line := "dlock:{" + name + "}:waiting"
	for n := int64(0); n != 1; time.Sleep(10 * time.Millisecond) { // until the waiter stands in line
		if n, err = d.admin(t).ZCard(ctx, line).Result(); err != nil || n > 1 {
			t.Fatalf("the line holds %d clients (%v); want the waiter", n, err)
		}
	}
	// gone stands first in line, as if its notice had crossed its waiter
	// giving up.
	if err := d.admin(t).ZAdd(ctx, line, redis.Z{Score: 0, Member: redislock.ClientID(gone)}).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the turn was not passed on")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the waiter took %v to get the lock; want a notice, not a poll", took)
	}
}

// No client can shorten another's place in the line: a waiter whose
// fallback poll is six seconds away stays in line, and is woken by the
// release, although another client joined the line after it, with a
// short retry, and left (as a Lock whose context ended does). Each place
// expires on its own: the other client's join once set the expiry of the
// whole line to its own, shorter, one, and the waiter, out of the line,
// took the lock at its next poll, seconds after the release.
func TestIntegrationNoClientShortensAnothersPlace(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			name := "line-shortened-" + tr.name
			first, err := newClient(t, d, tr.open).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			slowPoll := redislock.WithRetry(dlock.LinearBackoff(6*time.Second, 6*time.Second))
			got := make(chan time.Time, 1)
			go func() {
				l, err := newClient(t, d, tr.open).NewMutex(name, redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
				if err != nil {
					t.Error(err)
					got <- time.Time{}
					return
				}
				got <- time.Now()
				l.Release(context.Background())
			}()
			line := "dlock:{" + name + "}:waiting"
			for n := int64(0); n != 1; time.Sleep(10 * time.Millisecond) { // until the waiter stands in line
				if n, err = d.admin(t).ZCard(ctx, line).Result(); err != nil || n > 1 {
					t.Fatalf("the line holds %d clients (%v); want the waiter", n, err)
				}
			}
			// Another client waits a moment, with the default retry, and
			// gives up.
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err = newClient(t, d, tr.open).NewMutex(name, redislock.WithTTL(time.Minute)).Lock(wctx)
			cancel()
			if !errors.Is(err, dlock.ErrNotObtained) {
				t.Fatalf("the other client's Lock = %v; want not obtained", err)
			}
			time.Sleep(2 * time.Second) // past the other client's place, not the waiter's
			released := time.Now()
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-got:
				if took := at.Sub(released); took > time.Second {
					t.Errorf("the waiter took the lock %v after the release; want it woken by the release, not its poll", took)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not get the lock")
			}
		})
	}
}
