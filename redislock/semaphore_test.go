package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

func permitsKey(name string) string { return lockKey(name) + ":permits" }

// held returns the number of members of a semaphore's sorted set.
func held(t testing.TB, d *deployment, name string) string {
	t.Helper()
	out, err := d.servers[0].Do("ZCARD", permitsKey(name))
	if err != nil {
		t.Fatalf("ZCARD: %v", err)
	}
	return out
}

// Sixteen clients share three permits: never more than three are inside,
// and three are at some point.
func TestIntegrationSemaphoreBoundsHolders(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx := timeout(t, 60*time.Second)
			const clients, permits, rounds = 16, 3, 5
			name := "sem-bound-" + tr.name
			var inside, peak atomic.Int64
			var wg sync.WaitGroup
			for range clients {
				sem := newClient(t, d, tr.open).NewSemaphore(name, permits)
				wg.Go(func() {
					for range rounds {
						lease, err := sem.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if lease.Fence() == 0 {
							t.Error("a permit's lease has fence 0")
						}
						n := inside.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						time.Sleep(5 * time.Millisecond)
						inside.Add(-1)
						if err := lease.Release(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if p := peak.Load(); p != permits {
				t.Errorf("at most %d holders were inside at once; want exactly %d", p, permits)
			}
			if n := held(t, d, name); n != "0" {
				t.Errorf("%s permits still held after every release", n)
			}
		})
	}
}

// A holder whose client stops (no renewal, no release) loses its permit
// when its TTL runs out, and a waiter gets it then.
func TestIntegrationSemaphoreCrashedHolderPermitReturns(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	// Long enough for the second Lock and the TryLock to come before the
	// crashed permit expires, on a loaded machine too.
	const ttl = 2 * time.Second
	crashed, err := newClient(t, d, goRedis).NewSemaphore("sem-crash", 2, redislock.WithTTL(ttl), redislock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	other, err := newClient(t, d, goRedis).NewSemaphore("sem-crash", 2).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	waiter := newClient(t, d, goRedis).NewSemaphore("sem-crash", 2,
		redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second)))
	if _, err := waiter.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock with every permit taken, %v before the crashed one's Until = %v; want ErrNotObtained", time.Until(crashed.Until()), err)
	}
	lease, err := waiter.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if waited := time.Since(taken); waited > ttl+250*time.Millisecond {
		t.Errorf("the crashed holder's permit came back after %v; want within its TTL %v plus slack", waited, ttl)
	}
	select {
	case <-crashed.Done():
		if !errors.Is(crashed.Err(), dlock.ErrExpired) {
			t.Errorf("crashed lease Err = %v; want ErrExpired", crashed.Err())
		}
	default:
		t.Error("the crashed holder's lease was not ended by its deadline")
	}
}

// The watchdog keeps a permit for many TTLs; a permit removed behind the
// holder's back ends its lease within one renewal period.
func TestIntegrationSemaphoreRenewalAndLoss(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	const ttl = 600 * time.Millisecond
	sem := newClient(t, d, goRedis).NewSemaphore("sem-renew", 1, redislock.WithTTL(ttl))
	lease, err := sem.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	if err := lease.Err(); err != nil {
		t.Fatalf("lease ended after 3 TTLs under renewal: %v", err)
	}
	if _, err := newClient(t, d, goRedis).NewSemaphore("sem-renew", 1).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("another client's TryLock while the renewed permit is held = %v; want ErrNotObtained", err)
	}
	if out, _ := d.servers[0].Do("ZREM", permitsKey("sem-renew"), lease.Token()); out != "1" {
		t.Fatalf("ZREM of the holder's member = %q", out)
	}
	removed := time.Now()
	select {
	case <-lease.Done():
	case <-time.After(ttl):
		t.Fatal("the lease did not end after its permit was removed")
	}
	if took, period := time.Since(removed), ttl/3; took > period+100*time.Millisecond {
		t.Errorf("Done closed %v after the permit was removed; want within the renewal period %v", took, period)
	}
	if err := lease.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTakenOver) {
		t.Errorf("Err = %v; want ErrLost wrapping ErrTakenOver", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release of a lost permit = %v; want ErrNotHeld", err)
	}
}

func TestIntegrationSemaphoreChangingPermits(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	const name = "sem-limit"
	admin := newClient(t, d, goRedis).NewSemaphore(name, 1)
	first, err := admin.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Available(ctx); err != nil || n != 0 {
		t.Fatalf("Available with the only permit held = %d, %v; want 0", n, err)
	}

	// Raising the limit wakes a waiter at once, although it polls every 5s.
	waiter := newClient(t, d, goRedis).NewSemaphore(name, 1, redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second)))
	got := make(chan dlock.Lease, 1)
	go func() {
		l, err := waiter.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	raised := time.Now()
	if err := admin.AddPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if took := time.Since(raised); took > 500*time.Millisecond {
		t.Errorf("the waiter took %v to get the added permit; want < 500ms", took)
	}
	if out, _ := d.servers[0].Do("GET", lockKey(name)+":limit"); out != "2" {
		t.Errorf("stored limit %q after AddPermits(1); want 2", out)
	}

	// Lowering the limit takes nothing away but holds back new permits.
	if err := admin.SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Available(ctx); err != nil || n != 0 {
		t.Errorf("Available with 2 held and a limit of 1 = %d, %v; want 0", n, err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock with 1 held and a limit of 1 = %v; want ErrNotObtained", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := admin.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with none held and a limit of 1: %v", err)
	}
	third.Release(ctx)

	// A stored limit wins over the permits of a later constructor.
	if n, err := newClient(t, d, goRedis).NewSemaphore(name, 7).Available(ctx); err != nil || n != 1 {
		t.Errorf("Available through NewSemaphore(name, 7) with a stored limit of 1 = %d, %v; want 1", n, err)
	}

	// Bad values are refused and change nothing.
	for _, n := range []int{0, -1} {
		if err := admin.SetPermits(ctx, n); !errors.Is(err, redislock.ErrInvalidPermits) {
			t.Errorf("SetPermits(%d) = %v; want ErrInvalidPermits", n, err)
		}
	}
	for _, delta := range []int{-1, -5} {
		if err := admin.AddPermits(ctx, delta); !errors.Is(err, redislock.ErrInvalidPermits) || !strings.Contains(err.Error(), ">= 1") {
			t.Errorf("AddPermits(%d) on a limit of 1 = %v; want ErrInvalidPermits saying the limit must stay >= 1", delta, err)
		}
	}
	if out, _ := d.servers[0].Do("GET", lockKey(name)+":limit"); out != "1" {
		t.Errorf("stored limit %q after refused changes; want 1", out)
	}
	bad := newClient(t, d, goRedis).NewSemaphore("sem-zero", 0)
	if _, err := bad.Lock(ctx); !errors.Is(err, redislock.ErrInvalidPermits) || !strings.Contains(err.Error(), "NewSemaphore") {
		t.Errorf("Lock on NewSemaphore(name, 0) = %v; want ErrInvalidPermits naming NewSemaphore", err)
	}
	if _, err := bad.TryLock(ctx); !errors.Is(err, redislock.ErrInvalidPermits) {
		t.Errorf("TryLock on NewSemaphore(name, 0) = %v; want ErrInvalidPermits", err)
	}
	if _, err := bad.Available(ctx); !errors.Is(err, redislock.ErrInvalidPermits) {
		t.Errorf("Available on NewSemaphore(name, 0) = %v; want ErrInvalidPermits", err)
	}
	if out, _ := d.servers[0].Do("EXISTS", lockKey("sem-zero")+":limit"); out != "0" {
		t.Error("a semaphore with 0 permits wrote its limit")
	}
}

// A waiter whose context ends gets an error matching ErrNotObtained and
// the context's error, and leaves no member behind.
func TestIntegrationSemaphoreCancelledWait(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	holder, err := newClient(t, d, goRedis).NewSemaphore("sem-cancel", 1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	for _, tr := range transports {
		short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		_, err := newClient(t, d, tr.open).NewSemaphore("sem-cancel", 1).Lock(short)
		cancel()
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Lock past its deadline = %v; want ErrNotObtained and DeadlineExceeded", tr.name, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := held(t, d, "sem-cancel"); n != "1" {
		t.Errorf("%s members after cancelled waits; want only the holder's", n)
	}
}

func TestIntegrationSemaphoreWrongType(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	srv.Do("SET", permitsKey("sem-wt-set"), "x")
	srv.Do("HSET", lockKey("sem-wt-limit")+":limit", "f", "v")
	srv.Do("LPUSH", redislock.FenceKey("sem-wt-fence"), "x")
	defer srv.Do("DEL", redislock.FenceKey("sem-wt-fence"))
	for _, name := range []string{"sem-wt-set", "sem-wt-limit", "sem-wt-fence"} {
		sem := c.NewSemaphore(name, 2)
		for op, f := range map[string]func(context.Context) (dlock.Lease, error){"Lock": sem.Lock, "TryLock": sem.TryLock} {
			_, err := f(ctx)
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s on %s = %v; want a WRONGTYPE error, not ErrNotObtained", op, name, err)
			}
		}
	}
	for _, name := range []string{"sem-wt-set", "sem-wt-limit"} {
		sem := c.NewSemaphore(name, 2)
		if _, err := sem.Available(ctx); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Available on %s = %v; want a WRONGTYPE error", name, err)
		}
		if err := sem.AddPermits(ctx, 1); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("AddPermits on %s = %v; want a WRONGTYPE error", name, err)
		}
	}
	if out, _ := srv.Do("EXISTS", permitsKey("sem-wt-fence")); out != "0" {
		t.Error("an acquire that failed on the fence counter left a permit behind")
	}
	srv.Do("SET", lockKey("sem-wt-nan")+":limit", "lots")
	if _, err := c.NewSemaphore("sem-wt-nan", 2).TryLock(ctx); !errors.Is(err, redislock.ErrInvalidPermits) || !strings.Contains(err.Error(), "lots") {
		t.Errorf("TryLock with a limit of \"lots\" = %v; want ErrInvalidPermits quoting it", err)
	}
}
