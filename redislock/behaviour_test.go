package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// countingConn counts round trips (Eval calls), script calls, and calls
// of acquire.lua (a Mutex's attempts).
type countingConn struct {
	redislock.Conn
	evals, calls, acquires atomic.Int64
}

func (c *countingConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.evals.Add(1)
	c.calls.Add(int64(len(calls)))
	for _, call := range calls {
		if call.Script.Name == "acquire" {
			c.acquires.Add(1)
		}
	}
	c.Conn.Eval(ctx, calls, results)
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A release wakes a waiter through pub/sub at once, although its fallback
// poll is five seconds.
func TestIntegrationReleaseWakesWaiter(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	slowPoll := redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			holder := newClient(t, d, tr.open).NewMutex("wake-"+tr.name, redislock.WithTTL(time.Minute))
			waiter := newClient(t, d, tr.open).NewMutex("wake-"+tr.name, redislock.WithTTL(time.Minute), slowPoll)
			for round := range 3 {
				lease, err := holder.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					l, err := waiter.Lock(ctx)
					if err != nil {
						t.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					l.Release(ctx)
				}()
				time.Sleep(200 * time.Millisecond) // the waiter subscribes and sleeps
				released := time.Now()
				lease.Release(ctx)
				at := <-got
				if wake := at.Sub(released); wake > 500*time.Millisecond {
					t.Errorf("round %d: waiter took %v after the release; want a pub/sub wake-up, not a poll", round, wake)
				}
			}
		})
	}
}

// A lease that expires publishes nothing; the waiter retries when the
// holder's TTL runs out, not after its (long) fallback poll.
func TestIntegrationWaiterRetriesAtExpiry(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	holder := newClient(t, d, goRedis).NewMutex("expiry-wait", redislock.WithTTL(300*time.Millisecond), redislock.WithoutRenewal())
	waiter := newClient(t, d, goRedis).NewMutex("expiry-wait", redislock.WithRetry(dlock.LinearBackoff(10*time.Second, 10*time.Second)))
	lease, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := waiter.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("waited %v for a lock whose TTL was 300ms", waited)
	}
	if l.Fence() <= lease.Fence() {
		t.Errorf("fence %d after %d", l.Fence(), lease.Fence())
	}
}

func TestIntegrationRetryStrategyBoundsLock(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, d, goRedis)
	if _, err := c.NewMutex("bounded").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	counter := &countingConn{Conn: goRedis(t, d)}
	waiter := redislock.New(counter)
	t.Cleanup(func() { waiter.Close() })
	for _, tt := range []struct {
		retry    dlock.RetryStrategy
		attempts int64
	}{
		{dlock.NoRetry(), 1},
		{dlock.MaxAttempts(dlock.LinearBackoff(10*time.Millisecond, 10*time.Millisecond), 4), 4},
	} {
		counter.acquires.Store(0)
		start := time.Now()
		_, err := waiter.NewMutex("bounded", redislock.WithRetry(tt.retry)).Lock(ctx)
		if !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock = %v; want ErrNotObtained from the retry strategy", err)
		}
		// Lock makes its first attempt, subscribes, and retries at once:
		// the immediate retry is one more attempt than the strategy's
		// count only when the strategy allows a retry at all. (Giving up,
		// the waiter also leaves the line of waiting clients: one more
		// round trip, not an attempt.)
		if n := counter.acquires.Load(); n != tt.attempts && n != tt.attempts+1 {
			t.Errorf("%d attempts; want %d", n, tt.attempts)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Lock took %v", took)
		}
	}
}

func TestIntegrationMutexRefusesReentry(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	m := newClient(t, d, goRedis).NewMutex("reentry")
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []func(context.Context) (dlock.Lease, error){m.TryLock, m.Lock} {
		ctx, cancel := context.WithTimeout(lease.Context(), 2*time.Second) // a wait would be the bug
		_, err := op(ctx)
		cancel()
		if !errors.Is(err, redislock.ErrNotReentrant) {
			t.Errorf("locking again under the lease's context = %v; want ErrNotReentrant", err)
		}
	}
	lease.Release(ctx)
}

// The watchdog renews many leases in batches: one round trip per batch.
func TestIntegrationRenewalIsBatched(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel() // names of their own
			ctx := timeout(t, time.Minute)
			counter := &countingConn{Conn: tr.open(t, d)}
			c := redislock.New(counter)
			t.Cleanup(func() { c.Close() })
			// Enough leases that one round trip each would show; 1000 at a
			// 900ms TTL, and 250 at 1.2s, lost a lease under -race on a
			// loaded two-core machine (no renewal got through in 2/3 of
			// the TTL).
			const n = 250
			ttl := 2 * time.Second
			leases := make([]dlock.Lease, n)
			var wg sync.WaitGroup
			for g := range 32 { // take them quickly, so they start in step
				wg.Go(func() {
					for i := g; i < n; i += 32 {
						l, err := c.NewMutex(fmt.Sprintf("batch-%s-%d", tr.name, i), redislock.WithTTL(ttl)).TryLock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						leases[i] = l
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			evals, calls := counter.evals.Load(), counter.calls.Load()
			time.Sleep(4 * ttl) // about 12 renewal periods
			renewTrips, renewCalls := counter.evals.Load()-evals, counter.calls.Load()-calls
			for i, l := range leases {
				if l.Err() != nil {
					t.Fatalf("lease %d lost: %v", i, l.Err())
				}
			}
			rounds := renewCalls / n
			t.Logf("%d renewals of %d leases in %d round trips", renewCalls, n, renewTrips)
			if rounds < 8 {
				t.Errorf("%d renewal rounds in 4 TTLs; want about 12", rounds)
			}
			// Unbatched, this would be one round trip per renewal (n per
			// round). Batched, it is one per round once the leases have
			// drifted into step; a loaded machine (all packages under
			// -race on two cores) splits some rounds and retries a batch
			// that timed out, so allow three.
			if renewTrips > 3*rounds+2 {
				t.Errorf("%d round trips for %d renewal rounds; want about one per round", renewTrips, rounds)
			}
		})
	}
}

// The script cache can be flushed (or the server restarted) under a
// client: EVALSHA fails with NOSCRIPT and the client falls back to EVAL, for
// single calls and for renewal batches.
func TestIntegrationNoScriptFallback(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 30*time.Second)
			c := newClient(t, d, tr.open)
			// Renewals every TTL/3 each follow a flush. At 300ms, a
			// make test beside another (load 59) let the leases expire
			// between renewals, which is not this test's subject.
			ttl := 1500 * time.Millisecond
			a, err := c.NewMutex("noscript-a-"+tr.name, redislock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.NewMutex("noscript-b-"+tr.name, redislock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			untilA, untilB := a.Until(), b.Until()
			for range 3 {
				d.servers[0].Do("SCRIPT", "FLUSH")
				time.Sleep(ttl / 2)
			}
			if a.Err() != nil || b.Err() != nil {
				t.Fatalf("renewal after SCRIPT FLUSH failed: %v, %v", a.Err(), b.Err())
			}
			if !a.Until().After(untilA) || !b.Until().After(untilB) {
				t.Fatalf("no renewal in 1.5 TTLs of SCRIPT FLUSHes: Until %v -> %v, %v -> %v", untilA, a.Until(), untilB, b.Until())
			}
			d.servers[0].Do("SCRIPT", "FLUSH")
			if err := a.Release(ctx); err != nil {
				t.Fatalf("Release after SCRIPT FLUSH: %v", err)
			}
			d.servers[0].Do("SCRIPT", "FLUSH")
			if err := b.Refresh(ctx); err != nil {
				t.Fatalf("Refresh after SCRIPT FLUSH: %v", err)
			}
			b.Release(ctx)
		})
	}
}

// proxied returns a Mutex whose client reaches d through a fault proxy.
func proxied(t testing.TB, d *deployment, name string, opts ...redislock.Option) (*redislock.Mutex, *testenv.Proxy) {
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	return c.NewMutex(name, opts...), p
}

// With the network blackholed the holder cannot renew; Done closes no
// later than Until, and another client can take the lock after the TTL.
func TestIntegrationBlackholeEndsLeaseByUntil(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	ttl := 600 * time.Millisecond
	m, p := proxied(t, d, "blackhole", redislock.WithTTL(ttl))
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	select {
	case <-lease.Done():
		if late := time.Since(lease.Until()); late > dlocktest.Slack { // scheduling noise
			t.Errorf("Done closed %v after Until", late)
		}
	case <-time.After(2 * ttl):
		t.Fatal("Done still open two TTLs into a blackhole")
	}
	if !errors.Is(lease.Err(), dlock.ErrExpired) {
		t.Errorf("Err = %v; want ErrLost wrapping ErrExpired", lease.Err())
	}
	other, err := newClient(t, d, goRedis).NewMutex("blackhole").Lock(timeout(t, 2*ttl))
	if err != nil {
		t.Fatalf("another client could not take the lock after the TTL: %v", err)
	}
	if !time.Now().After(lease.Until()) {
		t.Error("another client got the lock before the first lease's Until")
	}
	other.Release(ctx)
}

// Latency well below the renewal margin does not lose the lease: with
// 40ms round trips, every renewal (every TTL/3) gets through long before
// Until. The client is configured as the README says (library timeouts and
// retries, ContextTimeoutEnabled), so a renewal slowed by a busy machine
// is bounded by the lease's Until, not by a read timeout tighter than the
// contract asks for.
func TestIntegrationLatencyDoesNotLoseLease(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	ttl := 1200 * time.Millisecond
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	var failed atomic.Int32
	c := redislock.New(goredisconn.New(rdb), redislock.WithObserver(dlock.ObserverFunc(func(e dlock.Event) {
		if e.Kind == dlock.EventRenewFailed {
			failed.Add(1)
			t.Logf("renewal failed: %v", e.Err)
		}
	})))
	t.Cleanup(func() { c.Close() })
	lease, err := c.NewMutex("latency", redislock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLatency(20 * time.Millisecond) // 40ms round trips
	time.Sleep(3 * ttl)
	if lease.Err() != nil {
		t.Fatalf("lease lost under 40ms round trips (%d failed renewals): %v", failed.Load(), lease.Err())
	}
	p.SetLatency(0)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An acquire whose reply never arrives may still have run: here the server
// is paused, the client gives up, and the server then executes the queued
// script. The client deletes that key again in the background rather than
// leaving it for its whole TTL.
func TestIntegrationInterruptedAcquireLeavesNoKey(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	m := c.NewMutex("interrupted", redislock.WithTTL(time.Minute))
	if _, err := m.TryLock(timeout(t, time.Second)); err != nil { // loads the script
		t.Fatal(err)
	}
	srv.Do("DEL", lockKey("interrupted"))
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err := m.TryLock(timeout(t, time.Second))
	if err == nil {
		t.Fatal("TryLock succeeded against a paused server")
	}
	time.Sleep(200 * time.Millisecond)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := srv.Do("EXISTS", lockKey("interrupted"))
		if out == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an interrupted acquire left the lock key behind for its whole TTL")
		}
	}
}

func TestIntegrationCloseReleasesLeases(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := redislock.New(goRedis(t, d))
	lease, err := c.NewMutex("closing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !errors.Is(lease.Err(), dlock.ErrReleased) {
		t.Errorf("lease after Close: %v; want ErrReleased", lease.Err())
	}
	if out, _ := d.servers[0].Do("EXISTS", lockKey("closing")); out != "0" {
		t.Error("Close left the lock key")
	}
	if _, err := c.NewMutex("closing").TryLock(ctx); !errors.Is(err, redislock.ErrClosed) {
		t.Errorf("TryLock on a closed client = %v; want ErrClosed", err)
	}
}

// A Lock still waiting when its Client is closed returns ErrClosed, not a
// dead lease, and leaves no key behind.
func TestIntegrationLockRacingClose(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	holder, err := newClient(t, d, goRedis).NewMutex("racing-close").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := redislock.New(goRedis(t, d))
	got := make(chan error, 1)
	go func() {
		l, err := waiting.NewMutex("racing-close", redislock.WithRetry(dlock.LinearBackoff(20*time.Millisecond, 20*time.Millisecond))).Lock(ctx)
		if l != nil {
			err = fmt.Errorf("got a lease (Err %v)", l.Err())
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	waiting.Close()
	holder.Release(ctx)
	if err := <-got; !errors.Is(err, redislock.ErrClosed) {
		t.Fatalf("Lock across Close = %v; want ErrClosed", err)
	}
	l, err := newClient(t, d, goRedis).NewMutex("racing-close").TryLock(ctx)
	if err != nil {
		t.Fatalf("the lock is not free after the closed client's Lock: %v", err)
	}
	l.Release(ctx)
}

// A Release whose context is already done still frees the lock, in the
// background, well before the TTL.
func TestIntegrationReleaseWithDoneContext(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	m := newClient(t, d, goRedis).NewMutex("release-done", redislock.WithTTL(time.Minute))
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := lease.Release(done); err == nil {
		t.Fatal("Release with a cancelled context reported success")
	}
	if !errors.Is(lease.Err(), dlock.ErrReleased) {
		t.Errorf("Err = %v; want ErrReleased", lease.Err())
	}
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out, _ := d.servers[0].Do("EXISTS", lockKey("release-done")); out == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key of a Release with a done context stayed for its TTL")
		}
	}
}

// A WAIT timeout under a millisecond must not become WAIT n 0, which blocks
// for ever.
func TestIntegrationSubMillisecondWaitTimeout(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			start := time.Now()
			_, err := newClient(t, d, tr.open).NewMutex("wait-us-"+tr.name, redislock.WithReplicas(1, 500*time.Microsecond)).TryLock(timeout(t, 5*time.Second))
			if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "replicas") {
				t.Errorf("TryLock without replicas = %v; want not obtained for lack of replicas", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// An acquire still buffered on a server paused past the TTL runs when the
// server resumes, however late: the clean-up of the interrupted attempt
// does not give up at the TTL, and deletes the key soon after the resume
// rather than leave it held for a full TTL with no lease behind it.
func TestIntegrationAcquireBufferedPastTTLIsCleaned(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	c := newClient(t, d, goRedis)
	ttl := 3 * time.Second
	m := c.NewMutex("buffered", redislock.WithTTL(ttl))
	if l, err := m.TryLock(timeout(t, time.Second)); err == nil { // loads the script
		l.Release(timeout(t, time.Second))
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(timeout(t, 200*time.Millisecond)); err == nil {
		t.Fatal("TryLock succeeded against a paused server")
	}
	time.Sleep(ttl + 500*time.Millisecond)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for {
		out, _ := srv.Do("EXISTS", lockKey("buffered"))
		if out == "0" && time.Since(resumed) > 200*time.Millisecond {
			break
		}
		if time.Since(resumed) > ttl*2/3 {
			t.Fatalf("the key set by the buffered acquire is still there %v after the resume", time.Since(resumed))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
