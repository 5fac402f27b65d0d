package dlocktest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Clients is the number of independent clients the contention tests use.
const Clients = 16

// uniqueKey returns a key no other test uses.
func uniqueKey(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("%s-%08x", name, rand.Uint32())
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) lockers(t testing.TB, key string, n int, o Options) []dlock.Locker {
	ls := make([]dlock.Locker, n)
	for i := range ls {
		ls[i] = s.b.NewLocker(t, key, o)
	}
	return ls
}

func mustLock(t testing.TB, ctx context.Context, l dlock.Locker) dlock.Lease {
	t.Helper()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return lease
}

// expectNotObtained checks that l cannot take the lock right now.
func expectNotObtained(t testing.TB, ctx context.Context, l dlock.Locker, holder dlock.Lease, why string) {
	t.Helper()
	for {
		start := time.Now()
		lease, err := l.TryLock(ctx)
		switch {
		case err == nil && start.After(holder.Until()):
			// The attempt began after the holder's lease ended: nothing
			// to judge (a retry after ErrUnavailable on a loaded machine).
			t.Logf("TryLock %s began after the holder's Until; not judged", why)
			lease.Release(ctx)
			return
		case err == nil:
			lease.Release(ctx)
			t.Fatalf("TryLock succeeded %s", why)
		case errors.Is(err, dlock.ErrNotObtained):
			return
		case errors.Is(err, dlock.ErrUnavailable) && holder.Err() == nil && time.Until(holder.Until()) > 0:
			// Healthy servers may still not answer within a backend's
			// bound when the machine is loaded (Redlock's node timeout
			// is a few hundred milliseconds): that is no wrong answer,
			// only none; ask again while the holder's lease is valid.
			t.Logf("TryLock %s: %v; asking again", why, err)
		default:
			t.Fatalf("TryLock %s: %v; want ErrNotObtained", why, err)
		}
	}
}

// waitDone waits for lease's Done up to d and returns when it closed.
func waitDone(t testing.TB, lease dlock.Lease, d time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-lease.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("Done not closed %v after %s", d, what)
		return time.Time{}
	}
}

// mutualExclusion: Clients clients increment a non-atomic counter under the
// lock; it must end exact, the in-section flag must never see two holders,
// and fences seen inside the section must strictly increase.
func (s *suite) mutualExclusion(t *testing.T) {
	key := uniqueKey(t)
	ls := s.lockers(t, key, Clients, Options{TTL: 5 * time.Second})
	ctx := ctxFor(t, 2*time.Minute)
	const rounds = 12
	var (
		inside atomic.Int32
		// counter is read and written in two separate steps, so only the
		// lock keeps updates from being lost. (Its accesses are atomic only
		// because the race detector cannot see ordering through Redis.)
		counter   atomic.Int64
		mu        sync.Mutex
		lastFence uint64
		failures  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() {
			for range rounds {
				lease, err := l.Lock(ctx)
				if err != nil {
					fail("client %d: Lock: %v", i, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					fail("client %d entered while %d others were inside", i, n-1)
				}
				mu.Lock()
				if lease.Fence() <= lastFence {
					failures = append(failures, fmt.Sprintf("fence %d after %d", lease.Fence(), lastFence))
				}
				lastFence = lease.Fence()
				mu.Unlock()
				v := counter.Load()
				runtime.Gosched()
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				counter.Store(v + 1)
				inside.Add(-1)
				if err := lease.Release(ctx); err != nil {
					fail("client %d: Release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if want := int64(Clients * rounds); counter.Load() != want {
		t.Errorf("counter = %d; want %d (lost updates under the lock)", counter.Load(), want)
	}
}

// tryLockRace: Clients clients TryLock at the same instant; exactly one wins
// (at most one where votes can split, and then a lone TryLock wins).
func (s *suite) tryLockRace(t *testing.T) {
	key := uniqueKey(t)
	ls := s.lockers(t, key, Clients, Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	for round := range 5 {
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []dlock.Lease
			silent  int // answered ErrUnavailable
		)
		for i, l := range ls {
			wg.Go(func() {
				<-start
				lease, err := l.TryLock(ctx)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, lease)
					mu.Unlock()
				case errors.Is(err, dlock.ErrUnavailable):
					// Healthy servers that did not answer in the
					// backend's bound on a loaded machine (Redlock's node
					// timeout): no answer, not a wrong one.
					t.Logf("round %d client %d: TryLock: %v", round, i, err)
					mu.Lock()
					silent++
					mu.Unlock()
				case !errors.Is(err, dlock.ErrNotObtained):
					t.Errorf("round %d client %d: TryLock: %v", round, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		switch {
		case len(winners) > 1:
			t.Fatalf("round %d: %d winners; want at most 1", round, len(winners))
		case len(winners) == 0 && !s.b.SplitVotes && silent == 0:
			t.Fatalf("round %d: no winner; want exactly 1", round)
		case len(winners) == 0:
			// Split votes, or attempts that got no answer: the losers'
			// partial holds are being released; a lone attempt must now
			// win.
			lease, err := ls[0].Lock(ctx)
			if err != nil {
				t.Fatalf("round %d: a lone Lock after a split race: %v", round, err)
			}
			winners = append(winners, lease)
		}
		if err := winners[0].Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

// leaseAccessors: Key, Token, Fence, Until and Context are sane.
func (s *suite) leaseAccessors(t *testing.T) {
	key := uniqueKey(t)
	ttl := 5 * time.Second
	l := s.b.NewLocker(t, key, Options{TTL: ttl})
	// The Lock's own context, with a value, is cancelled once Lock has
	// returned: that ends nothing, and the lease's Context keeps the value.
	type valueKey struct{}
	lctx, cancel := context.WithCancel(context.WithValue(ctxFor(t, time.Minute), valueKey{}, "v"))
	lease := mustLock(t, lctx, l)
	returned := time.Now()
	cancel()
	ctx := ctxFor(t, time.Minute)
	if lease.Fence() == 0 {
		t.Error("Fence() = 0; want > 0")
	}
	if len(lease.Token()) < 22 {
		t.Errorf("Token() = %q; want at least 128 bits", lease.Token())
	}
	if lease.Key() == "" || lease.Key() != l.Name() {
		t.Errorf("Key() = %q; want the lock's Name() %q", lease.Key(), l.Name())
	}
	// The request that won the lock was sent before Lock returned, and
	// Until is at most its send time plus the TTL less the drift
	// allowance. How long Lock took before sending it (a connection to
	// open, a busy machine) is no part of the bound.
	if u, latest := lease.Until(), returned.Add(ttl-dlock.Drift(ttl)); !u.After(time.Now()) || u.After(latest) {
		t.Errorf("Until() = Lock's return + %v; want after now and at most Lock's return + TTL - drift (%v)",
			u.Sub(returned), ttl-dlock.Drift(ttl))
	}
	if lease.Err() != nil {
		t.Errorf("Err() = %v while held", lease.Err())
	}
	if owner, ok := dlock.OwnerFrom(lease.Context()); !ok || owner != lease.Token() {
		t.Errorf("Context() owner = %q, %v; want the token", owner, ok)
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Errorf("Refresh after the Lock's context was cancelled: %v", err)
	}
	if lease.Err() != nil || lease.Context().Err() != nil || lease.Context().Value(valueKey{}) != "v" {
		t.Errorf("after the Lock's context was cancelled: Err %v, Context().Err %v, value %v; want nil, nil, the Lock context's value",
			lease.Err(), lease.Context().Err(), lease.Context().Value(valueKey{}))
	}
	other := mustLockAfter(t, ctx, s.b.NewLocker(t, key, Options{TTL: ttl}), lease)
	if other.Token() == lease.Token() {
		t.Error("two leases share a token")
	}
	if lease.Context().Err() == nil {
		t.Error("Context() not cancelled after Release")
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, dlock.ErrReleased) {
		t.Errorf("Context cause = %v; want ErrReleased", cause)
	}
	other.Release(ctx)
}

// mustLockAfter releases first and locks with l, checking the fence grew.
func mustLockAfter(t testing.TB, ctx context.Context, l dlock.Locker, first dlock.Lease) dlock.Lease {
	t.Helper()
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := mustLock(t, ctx, l)
	if next.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d; want strictly greater", next.Fence(), first.Fence())
	}
	return next
}

func (s *suite) releaseIsIdempotent(t *testing.T) {
	l := s.b.NewLocker(t, uniqueKey(t), Options{TTL: 5 * time.Second})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	for i := range 3 {
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}
	if !errors.Is(lease.Err(), dlock.ErrReleased) {
		t.Errorf("Err() = %v; want ErrReleased", lease.Err())
	}
	if err := lease.Refresh(ctx); err == nil {
		t.Error("Refresh of a released lease succeeded")
	}
	select {
	case <-lease.Done():
	default:
		t.Error("Done not closed after Release")
	}
}

// expiry: a fixed lease ends by Until with ErrExpired, and the lock can then
// be taken by another client.
func (s *suite) expiry(t *testing.T) {
	key := uniqueKey(t)
	ttl := 400 * time.Millisecond
	a := s.b.NewLocker(t, key, Options{TTL: ttl, NoRenewal: true})
	b := s.b.NewLocker(t, key, Options{TTL: ttl, NoRenewal: true})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, a)
	// Done closes by Until, judged against a timer due then: a make test
	// beside another (load 59) ran timers 239ms late.
	doneByUntil := WatchDoneByUntil(t, lease)
	expectNotObtained(t, ctx, b, lease, "while the fixed lease is valid")
	doneByUntil(ttl+5*time.Second, "the TTL")
	if err := lease.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Errorf("Err() = %v; want ErrLost wrapping ErrExpired", err)
	}
	next, err := b.Lock(ctxFor(t, ttl+time.Second))
	if err != nil {
		t.Fatalf("Lock after expiry: %v", err)
	}
	if next.Fence() <= lease.Fence() {
		t.Errorf("fence %d after expired %d", next.Fence(), lease.Fence())
	}
	next.Release(ctx)
}

// refresh: Refresh extends a fixed lease past its first TTL.
func (s *suite) refresh(t *testing.T) {
	key := uniqueKey(t)
	ttl := 1500 * time.Millisecond // 600ms: a loaded machine woke from the TTL/2 sleep after the lease had expired (Refresh: lease expired)
	a := s.b.NewLocker(t, key, Options{TTL: ttl, NoRenewal: true})
	b := s.b.NewLocker(t, key, Options{TTL: ttl, NoRenewal: true})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, a)
	first := lease.Until()
	time.Sleep(ttl / 2)
	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if !lease.Until().After(first) {
		t.Errorf("Until did not move: %v -> %v", first, lease.Until())
	}
	time.Sleep(first.Sub(time.Now()) + 50*time.Millisecond) // past the first deadline
	if lease.Err() != nil {
		t.Fatalf("lease ended after Refresh: %v", lease.Err())
	}
	expectNotObtained(t, ctx, b, lease, "after Refresh, past the original TTL")
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// renewal: the watchdog keeps a lease alive for several TTLs. The TTL
// leaves a renewal, sent every TTL/3, 600ms to be late by on a busy
// machine before the lease would lapse.
func (s *suite) renewal(t *testing.T) {
	key := uniqueKey(t)
	ttl := 900 * time.Millisecond
	a := s.b.NewLocker(t, key, Options{TTL: ttl})
	b := s.b.NewLocker(t, key, Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, a)
	first := lease.Until()
	deadline := time.Now().Add(4 * ttl)
	for time.Now().Before(deadline) {
		expectNotObtained(t, ctx, b, lease, "while the holder renews")
		// A renewal sent at time s is valid until s+TTL at most: Until may
		// never be further away than one TTL.
		if ahead := time.Until(lease.Until()); ahead > ttl {
			t.Fatalf("Until is %v ahead; a renewal cannot grant more than the TTL %v", ahead, ttl)
		}
		time.Sleep(ttl / 4)
	}
	if lease.Err() != nil {
		t.Fatalf("renewed lease ended: %v", lease.Err())
	}
	if !lease.Until().After(first.Add(2 * ttl)) {
		t.Errorf("Until moved from %v to %v; want renewed well past 3 TTLs", first, lease.Until())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := b.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
}

// releaseAfterLoss: a holder whose lease expired and was taken by another
// must not release the new holder's lock.
func (s *suite) releaseAfterLoss(t *testing.T) {
	key := uniqueKey(t)
	ttl := 300 * time.Millisecond
	a := s.b.NewLocker(t, key, Options{TTL: ttl, NoRenewal: true})
	b := s.b.NewLocker(t, key, Options{TTL: 10 * time.Second})
	c := s.b.NewLocker(t, key, Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	old := mustLock(t, ctx, a)
	WaitDoneByUntil(t, old, ttl+5*time.Second, "the TTL")
	cur, err := b.Lock(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Lock after expiry: %v", err)
	}
	err = old.Release(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Release of a lost lease = %v; want ErrNotHeld and ErrLost", err)
	}
	if err := old.Refresh(ctx); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Refresh of a lost lease = %v; want ErrLost", err)
	}
	expectNotObtained(t, ctx, c, cur, "after a stale holder's Release")
	if cur.Err() != nil {
		t.Errorf("current holder lost its lease to a stale Release: %v", cur.Err())
	}
	cur.Release(ctx)

	// A holder that has not noticed its loss yet (a fixed lease with a long
	// TTL whose lock was deleted and taken) is refused by the server.
	unaware := mustLock(t, ctx, s.b.NewLocker(t, key, Options{TTL: time.Minute, NoRenewal: true}))
	s.b.Sabotage(t, key)
	cur = mustLock(t, ctx, b)
	if err := unaware.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release by a holder whose lock was taken = %v; want ErrNotHeld", err)
	}
	expectNotObtained(t, ctx, c, cur, "after a Release by a holder whose lock was taken")
	if cur.Err() != nil {
		t.Errorf("current holder lost its lease to another's Release: %v", cur.Err())
	}
	cur.Release(ctx)
}

// externalDeletion: the holder learns within one renewal period (TTL/3)
// that its lock was removed behind its back.
func (s *suite) externalDeletion(t *testing.T) {
	key := uniqueKey(t)
	ttl := 900 * time.Millisecond
	l := s.b.NewLocker(t, key, Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	s.b.Sabotage(t, key)
	start := time.Now()
	waitDone(t, lease, ttl/3+Slack, "the lock was deleted (one renewal period)")
	t.Logf("loss reported %v after the deletion", time.Since(start))
	if err := lease.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Err() = %v; want ErrLost", err)
	}
	if cause := context.Cause(lease.Context()); !errors.Is(cause, dlock.ErrLost) {
		t.Errorf("Context cause = %v; want ErrLost", cause)
	}
	if err := lease.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release after loss = %v; want ErrNotHeld", err)
	}
}

// serverPause: with the server stopped past the TTL, renewals cannot get
// through and Done must close no later than Until (see WaitDoneByUntil
// for how a loaded machine's late timers are allowed for). A Done that
// waited for the server would come with its resumption, a TTL after Until
// at least.
func (s *suite) serverPause(t *testing.T) {
	key := uniqueKey(t)
	ttl := 500 * time.Millisecond
	l := s.b.NewLocker(t, key, Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	paused := make(chan struct{})
	go func() { defer close(paused); s.b.Pause(t, 2*ttl) }()
	defer func() { <-paused }()
	WaitDoneByUntil(t, lease, 2*ttl+Slack, "the server was paused past the TTL")
	if err := lease.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Err() = %v; want ErrLost", err)
	}
}

// cancelledWait: a Lock abandoned by its context reports both
// ErrNotObtained and the context's error, and leaves no keys, subscriptions
// or goroutines behind.
//
// Goroutines are counted by a profiler label that the case's goroutine
// sets and every goroutine it starts, and those they start, inherit: other
// tests running beside it in the process (a package's other parallel
// tests, which open pools and start servers) do not count.
func (s *suite) cancelledWait(t *testing.T) {
	key := uniqueKey(t)
	outer := pprof.WithLabels(context.Background(), pprof.Labels())
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(goroutineLabel, key)))
	t.Run("waits", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		holder := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
		waiter := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
		lease := mustLock(t, ctx, holder)

		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := waiter.Lock(dctx)
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock past its deadline = %v; want ErrNotObtained and DeadlineExceeded", err)
		}
		cctx, cancel2 := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel2)
		_, err = waiter.Lock(cctx)
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Lock = %v; want ErrNotObtained and Canceled", err)
		}
		if _, err := waiter.Lock(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Lock with a done context = %v; want Canceled", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		var left []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if left = s.b.Leftovers(t, key); len(left) == 0 {
				break
			}
		}
		if len(left) > 0 {
			t.Errorf("left behind after a cancelled wait and a release: %v", left)
		}
	})
	pprof.SetGoroutineLabels(outer)
	var left int
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left, stacks = labelled(key); left == 0 {
			return
		}
	}
	t.Errorf("%d goroutines started by the case still running after the clients closed:\n%s", left, stacks)
}

// goroutineLabel is the profiler label by which cancelledWait knows the
// goroutines it started.
const goroutineLabel = "dlocktest-case"

// labelled returns how many goroutines carry goroutineLabel with value,
// and their stacks.
func labelled(value string) (int, string) {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	want := fmt.Sprintf("%q:%q", goroutineLabel, value)
	n := 0
	var stacks []string
	for _, entry := range strings.Split(b.String(), "\n\n") {
		header, rest, _ := strings.Cut(entry, "\n")
		if !strings.HasPrefix(rest, "# labels: ") || !strings.Contains(strings.SplitN(rest, "\n", 2)[0], want) {
			continue
		}
		count, _, _ := strings.Cut(header, " @ ")
		var k int
		if _, err := fmt.Sscan(count, &k); err == nil {
			n += k
			stacks = append(stacks, entry)
		}
	}
	return n, strings.Join(stacks, "\n\n")
}

// cancelledDuringAttempt: the context runs out while an attempt is in
// flight (the server is paused). The error still matches ErrNotObtained and
// DeadlineExceeded, and once the server is back nothing is left behind,
// even if the interrupted attempt ran on the server after the client gave up.
func (s *suite) cancelledDuringAttempt(t *testing.T) {
	key := uniqueKey(t)
	l := s.b.NewLocker(t, key, Options{TTL: 30 * time.Second})
	// Lock, not TryLock: a Cluster may still be failing over after the
	// case before (CLUSTERDOWN), which Lock waits through.
	warm, err := l.Lock(ctxFor(t, 30*time.Second)) // connections and scripts ready
	if err != nil {
		t.Fatal(err)
	}
	warm.Release(ctxFor(t, 5*time.Second))
	// The pause starts 100ms before the Lock; a loaded machine may start
	// it after the Lock's attempt went through, which leaves nothing to
	// check: that Lock's lease is released and the round played again.
	for round := 1; ; round++ {
		paused := make(chan struct{})
		go func() { defer close(paused); s.b.Pause(t, time.Second) }()
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		lease, err := l.Lock(ctx)
		cancel()
		<-paused
		if err == nil && round < 3 {
			t.Logf("round %d: the attempt went through before the pause took effect; again", round)
			if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			continue
		}
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock that ran out during an attempt = %v; want ErrNotObtained and DeadlineExceeded", err)
		}
		break
	}
	var left []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left = s.b.Leftovers(t, key); len(left) == 0 {
			return
		}
	}
	t.Errorf("left behind by an attempt interrupted by its deadline: %v", left)
}

// fencesAcrossRestart: the fence counter is lost with the server's data, yet
// the next grant's fence is still larger.
func (s *suite) fencesAcrossRestart(t *testing.T) {
	key := uniqueKey(t)
	ctx := ctxFor(t, time.Minute)
	l := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
	var last uint64
	for range 3 {
		lease := mustLock(t, ctx, l)
		if lease.Fence() <= last {
			t.Fatalf("fence %d after %d", lease.Fence(), last)
		}
		last = lease.Fence()
		lease.Release(ctx)
	}
	s.b.RestartEmpty(t)
	l2 := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
	var lease dlock.Lease
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if lease, err = l2.Lock(ctxFor(t, 2*time.Second)); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Lock after restart: %v", err)
	}
	switch {
	case s.b.FencesRestartWithData && lease.Fence() > last:
		t.Errorf("fence after a restart without data = %d, above %d; the backend declares FencesRestartWithData, which is then not true", lease.Fence(), last)
	case !s.b.FencesRestartWithData && lease.Fence() <= last:
		t.Errorf("fence after a restart without data = %d; want > %d", lease.Fence(), last)
	}
	lease.Release(ctx)
}

// releaseDuringRenewal: a lease released while a renewal of it is in
// flight says it was released. The renewal may reach the server after the
// release and find the lock gone; that must not end the lease as lost
// (Err, the observer and metrics would report a loss that did not
// happen). Many holders release around their first renewal, each at a
// slightly different moment, so that some releases overlap a renewal.
//
// A loaded machine can keep a release from getting an answer in time.
// Such a Release returns an error matching dlock.ErrUnavailable (see
// dlock.Lease): it is counted as no answer, its lease must still have
// ended as released, and the name must be free of it by the lease's Until
// (see freeBy). Any other error fails, and so do more than half the releases
// without an answer, or expired before it: the test could not check its
// subject.
func (s *suite) releaseDuringRenewal(t *testing.T) {
	const holders, rounds = 32, 6
	ttl := 1200 * time.Millisecond
	ctx := ctxFor(t, 2*time.Minute)
	var wg sync.WaitGroup
	var released, expired, unanswered, lost atomic.Int64
	var firstLoss, firstUnanswered atomic.Value
	// Every locker is made before any goroutine starts: NewLocker may
	// fail the test (t.Fatal), which must not leave goroutines behind that
	// report after the test has ended.
	lockers := make([]dlock.Locker, holders)
	// Who holds a lock found held after a release without an answer (see
	// freeBy), from the backend's Admin, made here for the same reason.
	inspect := make([]func(context.Context) (dlock.Info, error), holders)
	var adm dlock.Admin
	if s.b.Admin != nil {
		adm = s.b.Admin(t)
	}
	for h := range lockers {
		key := fmt.Sprintf("%s-%d", uniqueKey(t), h)
		lockers[h] = s.b.NewLocker(t, key, Options{TTL: ttl})
		if adm != nil {
			name := s.adminName(key)
			inspect[h] = func(ctx context.Context) (dlock.Info, error) { return adm.Inspect(ctx, name) }
		}
	}
	for h, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				lease, err := l.Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				// The first renewal is due at about TTL/3; release within
				// a few milliseconds of it.
				skew := time.Duration(h*rounds+r)*time.Millisecond/8 - 12*time.Millisecond
				time.Sleep(ttl/3 + skew)
				called := time.Now()
				switch err := lease.Release(ctx); {
				case errors.Is(err, dlock.ErrExpired):
					// No renewal got through in 2/3 of the TTL (a stalled
					// machine): a true loss, and not this test's subject.
					expired.Add(1)
					continue
				case errors.Is(err, dlock.ErrUnavailable):
					unanswered.Add(1)
					firstUnanswered.CompareAndSwap(nil, fmt.Sprint(err))
					select {
					case <-lease.Done():
					default:
						t.Errorf("Release returned %v, and the lease is still open", err)
					}
					// A release that outlasted the lease (a stalled machine:
					// the servers did not answer before its Until) finds it
					// expired meanwhile, which Err may say instead.
					if e := lease.Err(); e != dlock.ErrReleased && !(errors.Is(e, dlock.ErrExpired) && !time.Now().Before(lease.Until())) {
						t.Errorf("Release returned %v, and Err() = %v, not ErrReleased", err, e)
					}
					// A renewal sent just before Release may have reached the
					// servers the release did not, and its reply not come
					// back: their keys then live a TTL from its arrival, up
					// to a renewal period (TTL/3, a renewal's longest
					// attempt) after the Release call, later than the Until
					// the holder knew.
					freeBy(ctx, t, l, ttl, later(lease.Until(), called.Add(ttl+ttl/3)).Add(dlock.Drift(ttl)+Slack), lease.Token(), inspect[h])
					continue
				case err != nil:
					t.Errorf("Release: %v", err)
					continue
				}
				released.Add(1)
				if err := lease.Err(); err != dlock.ErrReleased {
					lost.Add(1)
					firstLoss.CompareAndSwap(nil, fmt.Sprint(err))
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("measured: of %d releases, %d answered, %d unanswered (first: %v), %d expired before", holders*rounds,
		released.Load(), unanswered.Load(), firstUnanswered.Load(), expired.Load())
	if n := lost.Load(); n > 0 {
		t.Errorf("%d of %d leases released with Release() == nil say Err() = %v, not ErrReleased", n, released.Load(), firstLoss.Load())
	}
	if n := expired.Load(); n > holders*rounds/2 {
		t.Errorf("%d of %d leases expired before their release, although renewed every TTL/3: the test could not check its subject", n, holders*rounds)
	}
	if n := unanswered.Load(); n > holders*rounds/2 {
		t.Errorf("%d of %d releases got no answer from the servers (first: %v): the test could not check its subject", n, holders*rounds, firstUnanswered.Load())
	}
}

// freeBy checks, after a Release that got no answer, that the lock l
// makes, of lease time ttl, is free on the servers by deadline: the
// lease's TTL ran out, or the backend's retry in the background freed it.
// It tries l.TryLock until one is granted; one that finds the lock held
// counts only if it was sent after deadline, so a late answer on a loaded
// machine does not count against the lock, and answered within ttl/2: a
// later answer may be a grant given back for being too short (see
// dlock.Locker), which also matches ErrNotObtained. TryLocks that get no
// answer are tried again, for ten seconds past deadline at most.
//
// A lock found held past deadline is not necessarily the released
// lease's: freeBy's own TryLocks that were not granted may have taken it
// on some servers (all of them, for one that got no answer or a grant
// given back; a minority, for a Redlock attempt that found the rest held)
// and left it there, for a TTL from their arrival, which on a stalled
// server can be seconds after they were sent. So freeBy asks inspect who
// holds it: the released lease's token, past deadline, fails the test;
// any other holder (freeBy's own TryLocks carry the label freeByLabel)
// is waited out, for the TTL (plus drift and slack) after freeBy's last
// attempt, and the lock looked at again. Without inspect (a Backend
// without Admin), a lock held past deadline fails the test unless one of
// freeBy's attempts was answered in the TTL (plus drift and slack) before
// the TryLock that found it held was sent.
//
// freeBy runs in a goroutine of its own: it reports with t.Errorf and
// t.Logf, never t.Fatal.
func freeBy(ctx context.Context, t reporter, l dlock.Locker, ttl time.Duration, deadline time.Time,
	token string, inspect func(context.Context) (dlock.Info, error)) {
	giveUp := deadline.Add(10 * time.Second)
	tryCtx := dlock.WithLabel(ctx, freeByLabel)
	var ownGone time.Time // when the keys of freeBy's attempts so far are gone at the latest
	for ctx.Err() == nil {
		sent := time.Now()
		lease, err := l.TryLock(tryCtx)
		if err == nil {
			if err := lease.Release(ctx); err != nil && !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, dlock.ErrExpired) {
				t.Errorf("Release after the lock came free: %v", err)
			}
			return
		}
		mine := ownGone // the keys of freeBy's attempts before this one
		ownGone = time.Now().Add(ttl + dlock.Drift(ttl) + Slack)
		switch {
		case errors.Is(err, dlock.ErrNotObtained) && !errors.Is(err, dlock.ErrUnavailable) && time.Since(sent) >= ttl/2:
			// Perhaps a short grant: nothing to judge by.
			if sent.After(giveUp) {
				return
			}
		case errors.Is(err, dlock.ErrUnavailable):
			if sent.After(giveUp) {
				return // the servers do not answer: nothing to judge
			}
		case errors.Is(err, dlock.ErrNotObtained):
			if !sent.After(deadline) {
				break
			}
			past := sent.Sub(deadline).Round(time.Millisecond)
			if inspect == nil {
				if sent.After(mine) {
					t.Errorf("lock still held %v past the Until (plus drift and slack) of a lease whose Release got no answer", past)
					return
				}
			} else {
				asked := time.Now()
				switch info, err := inspect(ctx); {
				case err != nil:
					// Nothing to judge by: look again.
				case holds(info, token):
					t.Errorf("lock still held %v past the Until (plus drift and slack) of a lease whose Release got no answer, by that lease: Inspect %v later found %s",
						past, asked.Sub(sent).Round(time.Millisecond), describe(info))
					return
				default:
					why := "within the TTL of an attempt of freeBy's own"
					if sent.After(mine) {
						why = "no attempt of freeBy's own answered in the TTL before"
					}
					t.Logf("lock held %v past the Until (plus drift and slack) of a lease whose Release got no answer (%s), not by that lease: Inspect %v later found %s",
						past, why, asked.Sub(sent).Round(time.Millisecond), describe(info))
				}
			}
			if sent.After(giveUp) {
				t.Logf("lock held by others than the released lease until %v past its Until (plus drift and slack)", past)
				return
			}
			// Perhaps freeBy's own attempts hold it: look again when they
			// are gone.
			time.Sleep(time.Until(ownGone))
			continue
		default:
			t.Errorf("TryLock after a Release that got no answer: %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A reporter is what freeBy reports to: a *testing.T.
type reporter interface {
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// freeByLabel is the label (dlock.WithLabel) of freeBy's TryLocks, which
// an Inspect that finds one of them holding the lock shows.
const freeByLabel = "dlocktest freeBy"

// holds reports whether info shows the lease of token holding the lock,
// or its key on some of a quorum backend's servers (in Info.Detail).
func holds(info dlock.Info, token string) bool {
	sum := sha1.Sum([]byte(token))
	for _, h := range info.Holders {
		if h.Owner == token || h.Owner == hex.EncodeToString(sum[:]) {
			return true
		}
	}
	return strings.Contains(info.Detail, token)
}

// describe sums up info for a test's message.
func describe(info dlock.Info) string {
	s := fmt.Sprintf("%s, TTL %v", info.Kind, info.TTL)
	for _, h := range info.Holders {
		s += fmt.Sprintf(", held by %q", h.Owner)
	}
	if info.Detail != "" {
		s += ": " + info.Detail
	}
	return s
}

// maxHold: a renewed lease made with a maximum hold ends by the cap, says
// ErrMaxHold, and gives the lock back at once: a waiter is granted well
// before the lock's TTL would have run out, and nothing is left behind.
func (s *suite) maxHold(t *testing.T) {
	key := uniqueKey(t)
	// Renewals every TTL/3 carry Until to the cap; one may be late by more
	// than a second before the lease would end by ErrExpired instead.
	ttl, maxHold := 2*time.Second, 3*time.Second
	a := s.b.NewLocker(t, key, Options{TTL: ttl, MaxHold: maxHold})
	b := s.b.NewLocker(t, key, Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, a)
	granted := time.Now()
	if lease.Until().After(granted.Add(maxHold)) {
		t.Fatalf("Until is %v after the grant; the maximum hold is %v", lease.Until().Sub(granted), maxHold)
	}
	got := make(chan time.Time, 1)
	go func() {
		l, err := b.Lock(ctx)
		if err != nil {
			t.Errorf("waiter's Lock: %v", err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		l.Release(context.WithoutCancel(ctx))
	}()
	doneAt := waitDone(t, lease, maxHold+Slack, "the maximum hold")
	if err := lease.Err(); !errors.Is(err, dlock.ErrMaxHold) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Err() = %v after the maximum hold; want ErrMaxHold and ErrLost", err)
	}
	if err := lease.Release(ctx); !errors.Is(err, dlock.ErrMaxHold) {
		t.Errorf("Release after the maximum hold: %v; want ErrMaxHold", err)
	}
	// The lock is given back when the lease ends; without that the waiter
	// would wait for the key's TTL (up to a full TTL after the cap).
	select {
	case at := <-got:
		if at.IsZero() {
			return
		}
		if at.Before(doneAt.Add(-Slack)) {
			t.Errorf("waiter granted %v before the capped lease's Done", doneAt.Sub(at))
		}
		if wait := at.Sub(doneAt); wait > ttl/2+Slack {
			t.Errorf("waiter granted %v after the capped lease ended; want the lock given back at once (within TTL/2)", wait)
		}
	case <-time.After(ttl + 2*Slack):
		t.Fatalf("waiter not granted %v after the capped lease ended", ttl+2*Slack)
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
