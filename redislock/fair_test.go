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
	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// fairSlowPoll makes waiters depend on wake-ups: their fallback poll is
// longer than the tests that use it.
var fairSlowPoll = redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second))

// waitQueueLen waits until the queue of the fair lock name has n entries.
func waitQueueLen(t *testing.T, admin redis.UniversalClient, name string, n int64) {
	t.Helper()
	var got int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var err error
		if got, err = admin.LLen(context.Background(), lockKey(name)+":queue").Result(); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
	}
	t.Fatalf("queue of %q has %d entries; want %d", name, got, n)
}

// queueState returns LLEN of the queue and ZCARD of the deadlines.
func queueState(t *testing.T, admin redis.UniversalClient, name string) (int64, int64) {
	t.Helper()
	ctx := context.Background()
	n, err := admin.LLen(ctx, lockKey(name)+":queue").Result()
	if err != nil {
		t.Fatal(err)
	}
	z, err := admin.ZCard(ctx, lockKey(name)+":timeouts").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n, z
}

// fairQueue makes n waiters, each on its own client, join the queue of
// name one by one behind a holder, then releases the holder. It returns
// the order in which the waiters got the lock, their fences in that order,
// and the script calls (client-sent commands) of every waiter's client.
func fairQueue(t *testing.T, name string, n int) (order []int, fences []uint64, calls int64) {
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	admin := d.admin(t)
	holder, err := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fences = append(fences, holder.Fence())
	var mu sync.Mutex
	var wg sync.WaitGroup
	counters := make([]*countingConn, n)
	for i := range n {
		counters[i] = &countingConn{Conn: goRedis(t, d)}
		c := redislock.New(counters[i])
		t.Cleanup(func() { c.Close() })
		m := c.NewFairMutex(name, redislock.WithTTL(time.Minute), fairSlowPoll)
		wg.Go(func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			fences = append(fences, l.Fence())
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		waitQueueLen(t, admin, name, int64(i+1))
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, c := range counters {
		calls += c.calls.Load()
	}
	return order, fences, calls
}

// Waiters get the lock in the order in which they joined the queue, with
// increasing fences.
func TestIntegrationFairFIFO(t *testing.T) {
	t.Parallel()
	order, fences, _ := fairQueue(t, "fair-fifo", 8)
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the lock in the order %v; want 0..7", order)
		}
	}
	if len(order) != 8 {
		t.Fatalf("%d of 8 waiters got the lock", len(order))
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v do not increase", fences)
		}
	}
}

// A release wakes only the head waiter: a hand-over costs a constant
// number of commands, not one per waiter.
func TestIntegrationFairWakesOnlyHead(t *testing.T) {
	t.Parallel()
	const n = 8
	order, _, calls := fairQueue(t, "fair-head", n)
	if len(order) != n {
		t.Fatalf("%d of %d waiters got the lock", len(order), n)
	}
	// Per waiter: the first attempt, joining the queue, the attempt on
	// its wake-up, and the release.
	if calls > 5*n {
		t.Errorf("%d waiters sent %d commands; want at most %d (a herd woken on every release sends about n^2/2 more)", n, calls, 5*n)
	}
	t.Logf("%d waiters, %d commands", n, calls)
}

// A waiter that died in the queue (it stopped renewing its place) delays
// the others by at most its deadline; one whose deadline has passed not at
// all.
func TestIntegrationFairDeadWaiterPurged(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	admin := d.admin(t)
	for _, tc := range []struct {
		name   string
		left   time.Duration // the dead waiter's remaining deadline
		least  time.Duration // the live waiter's least wait
		queued int64         // the queue once the live waiter has joined
	}{{"past", -time.Second, 0, 1}, {"future", 800 * time.Millisecond, 500 * time.Millisecond, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			name := "fair-dead-" + tc.name
			holder, err := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			now, err := admin.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			deadline := float64(now.Add(tc.left).UnixMilli())
			admin.RPush(ctx, lockKey(name)+":queue", "dead-waiter")
			admin.ZAdd(ctx, lockKey(name)+":timeouts", redis.Z{Score: deadline, Member: "dead-waiter"})
			// A fallback poll of 200ms: the dead waiter is never woken,
			// and never hands over.
			m := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithRetry(dlock.LinearBackoff(200*time.Millisecond, 200*time.Millisecond)))
			got := make(chan error, 1)
			start := time.Now()
			go func() {
				l, err := m.Lock(ctx)
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			// Joining drops a dead head at once.
			waitQueueLen(t, admin, name, tc.queued)
			holder.Release(ctx)
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			waited := time.Since(start)
			if waited < tc.least || waited > tc.left+2*time.Second {
				t.Errorf("waited %v behind a dead waiter with %v left", waited, tc.left)
			}
			if n, z := queueState(t, admin, name); n != 0 || z != 0 {
				t.Errorf("queue %d, deadlines %d after the hand-over; want 0, 0", n, z)
			}
		})
	}
}

// Waiters that give up, at the head and in the middle, leave the queue as
// it was, and the next waiter still gets the lock at once.
func TestIntegrationFairGiveUpLeavesQueueConsistent(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	admin := d.admin(t)
	const name = "fair-giveup"
	holder, err := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   dlock.Lease
		err error
	}
	start := func(ctx context.Context) chan result {
		m := newClient(t, d, goRedis).NewFairMutex(name, fairSlowPoll)
		ch := make(chan result, 1)
		go func() {
			l, err := m.Lock(ctx)
			ch <- result{l, err}
		}()
		return ch
	}
	headCtx, cancelHead := context.WithCancel(ctx)
	head := start(headCtx)
	waitQueueLen(t, admin, name, 1)
	midCtx, cancelMid := context.WithCancel(ctx)
	mid := start(midCtx)
	waitQueueLen(t, admin, name, 2)
	last := start(ctx)
	waitQueueLen(t, admin, name, 3)

	cancelMid()
	if r := <-mid; !errors.Is(r.err, dlock.ErrNotObtained) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, %v", r.l, r.err)
	}
	if n, z := queueState(t, admin, name); n != 2 || z != 2 {
		t.Fatalf("queue %d, deadlines %d after the middle waiter left; want 2, 2", n, z)
	}
	cancelHead()
	if r := <-head; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled head: %v, %v", r.l, r.err)
	}
	if n, z := queueState(t, admin, name); n != 1 || z != 1 {
		t.Fatalf("queue %d, deadlines %d after the head left; want 1, 1", n, z)
	}
	released := time.Now()
	holder.Release(ctx)
	r := <-last
	if r.err != nil {
		t.Fatal(r.err)
	}
	if wait := time.Since(released); wait > time.Second {
		t.Errorf("the remaining waiter took %v after the release; want a wake-up", wait)
	}
	if r.l.Fence() <= holder.Fence() {
		t.Errorf("fence %d after %d", r.l.Fence(), holder.Fence())
	}
	r.l.Release(ctx)
	if n, err := admin.Exists(ctx, lockKey(name), lockKey(name)+":queue", lockKey(name)+":timeouts").Result(); err != nil || n != 0 {
		t.Errorf("%d lock/queue keys left (%v)", n, err)
	}
}

// Sixteen clients take the lock in turn: never two at once, no hold lost,
// fences strictly increasing.
func TestIntegrationFairMutualExclusion(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	const clients, rounds = 16, 5
	var inside, most atomic.Int64
	var mu sync.Mutex
	var count int
	var last uint64
	var wg sync.WaitGroup
	for range clients {
		m := newClient(t, d, goRedis).NewFairMutex("fair-mutex", redislock.WithTTL(5*time.Second))
		wg.Go(func() {
			for range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for {
					if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				mu.Lock()
				count++
				if l.Fence() <= last {
					t.Errorf("fence %d after %d", l.Fence(), last)
				}
				last = l.Fence()
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders at once", most.Load())
	}
	if count != clients*rounds {
		t.Errorf("counter %d; want %d", count, clients*rounds)
	}
}

// A holder that never releases: the head waiter gets the lock when its
// TTL runs out, not after its fallback poll.
func TestIntegrationFairExpiry(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	holder := newClient(t, d, goRedis).NewFairMutex("fair-expiry", redislock.WithTTL(300*time.Millisecond), redislock.WithoutRenewal())
	waiter := newClient(t, d, goRedis).NewFairMutex("fair-expiry", redislock.WithRetry(dlock.LinearBackoff(10*time.Second, 10*time.Second)))
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

// TryLock does not jump the queue; bad inputs and keys of the wrong type
// are reported clearly.
func TestIntegrationFairTryLockAndErrors(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	admin := d.admin(t)
	c := newClient(t, d, goRedis)
	m := c.NewFairMutex("fair-try")
	admin.RPush(ctx, lockKey("fair-try")+":queue", "someone")
	admin.ZAdd(ctx, lockKey("fair-try")+":timeouts", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "someone"})
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("TryLock with a waiter in the queue: %v; want ErrNotObtained", err)
	}
	admin.Del(ctx, lockKey("fair-try")+":queue", lockKey("fair-try")+":timeouts")
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(l.Context()); !errors.Is(err, redislock.ErrNotReentrant) {
		t.Errorf("re-entry: %v", err)
	}
	l.Release(ctx)

	if _, err := c.NewFairMutex("").Lock(ctx); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := c.NewFairMutex("x", redislock.WithTTL(time.Microsecond)).TryLock(ctx); err == nil {
		t.Error("tiny TTL accepted")
	}
	admin.Set(ctx, lockKey("fair-wrong")+":queue", "x", 0)
	if _, err := c.NewFairMutex("fair-wrong").Lock(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("queue of the wrong type: %v", err)
	}
}

// fairBackend is the conformance backend of FairMutex on d. Leftovers
// also reports queue keys: a cancelled wait must leave no entry behind.
func fairBackend(d *deployment, open opener) dlocktest.Backend {
	b := kindBackend(d, open, func(c *redislock.Client, key string, opts ...redislock.Option) dlock.Locker {
		return c.NewFairMutex(key, opts...)
	})
	b.Leftovers = func(t testing.TB, key string) []string {
		left := leftovers(t, d, key)
		ctx := context.Background()
		if n, err := d.admin(t).Exists(ctx, lockKey(key)+":queue", lockKey(key)+":timeouts").Result(); err != nil || n > 0 {
			left = append(left, fmt.Sprintf("queue keys (exists=%d, err=%v)", n, err))
		}
		return left
	}
	return b
}

// FairMutex's suite runs once per topology: on go-redis here, on rueidis
// in a Cluster. What a transport does for a FairMutex (scripts, pipelined
// renewals, subscriptions) is what it does for a Mutex, whose suite runs
// on both transports in both topologies; running the FairMutex suite on
// both transports as well took a minute more and tested the same
// transport code again.
func TestIntegrationFairConformance(t *testing.T) {
	if !apart(t) {
		dlocktest.Run(t, fairBackend(standalone(t), goRedis))
	}
}

// In a Cluster every key of the lock, and the waiters' channels, share
// one hash tag.
func TestIntegrationFairConformanceCluster(t *testing.T) {
	if !apart(t) {
		dlocktest.Run(t, fairBackend(cluster(t), rueidisClient))
	}
}

// A server paused past the TTL does not reorder the queue: the head
// waiter, granted on resume by an attempt whose reply came too late to
// use, gives the grant back and keeps its place, so the waiters are still
// served in the order they joined.
func TestIntegrationFairOrderSurvivesServerPause(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	name := "fair-pause"
	ttl := 600 * time.Millisecond
	ctx := timeout(t, 30*time.Second)
	admin := d.admin(t)
	holder, err := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	const n = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		m := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithTTL(ttl))
		wg.Go(func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			l.Release(ctx)
		})
		waitQueueLen(t, admin, name, int64(i+1))
	}
	srv := d.servers[0]
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("after a %v pause (TTL %v) the waiters got the lock in the order %v; want 0..%d", 2*time.Second, ttl, order, n-1)
		}
	}
}

// A waiter whose attempt timed out during a pause keeps waiting (issue 32),
// and what that attempt may have taken is given back in the background,
// keyed by the attempt's own token: never by one that a later attempt of
// the same waiter takes the lock with. (Every attempt of a Lock used the
// waiter's token: the clean-up deleted the lock the waiter was then
// granted, and a third client took it while the waiter's lease was valid,
// 2 of 2 runs.)
func TestIntegrationFairCleanUpSparesTheWaitersGrant(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	name := "fair-cleanup-grant"
	ctx := timeout(t, 30*time.Second)
	holder, err := newClient(t, d, goRedis).NewFairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lease, 1)
	go func() {
		l, err := newClient(t, d, goRedis).NewFairMutex(name).Lock(ctx)
		if err != nil {
			t.Errorf("the waiter: %v", err)
		}
		got <- l
	}()
	waitQueueLen(t, d.admin(t), name, 1)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past AttemptTimeout: an attempt of the waiter times out
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	defer l.Release(ctx)
	third := newClient(t, d, goRedis).NewFairMutex(name)
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) { // past the clean-up's late looks
		if v, _ := srv.Do("GET", lockKey(name)); v != l.Token() && l.Err() == nil {
			t.Errorf("%v after the waiter was granted, the key holds %q, not its token, while its lease is valid", time.Since(start).Round(time.Millisecond), v)
			if other, err := third.TryLock(ctx); err == nil {
				t.Errorf("and another client took the lock, with fence %d (the waiter's: %d)", other.Fence(), l.Fence())
				other.Release(ctx)
			}
			return
		}
	}
}
