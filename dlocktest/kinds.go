package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A Kind is one kind of lock that a backend offers on a name, as RunKinds
// makes it: a Mutex, a FairMutex, one side of an RWMutex, a Semaphore of
// some size, a SessionMutex, an Election's campaign.
type Kind struct {
	// Name names the kind in subtests and messages: "Mutex",
	// "RWMutex.read", "Semaphore(2)".
	Name string

	// Lock is the kind of lock that Inspect reports while this kind holds
	// the name. Kinds with the same Lock are modes of one lock, and wait
	// for each other: an RWMutex's readers and its writer, pglock's Mutex
	// and SessionMutex, an Election and the Mutex its leader holds. Kinds
	// with different Locks do not share a name: while one holds it, the
	// other's TryLock and Lock return at once with an error matching
	// dlock.ErrNotObtained and dlock.ErrKindMismatch.
	Lock dlock.Kind

	// Holders is how many leases of this kind may hold the name at once:
	// 1 for an exclusive kind, n for a Semaphore of n permits, AnyNumber
	// for an RWMutex's readers.
	Holders int

	// New returns a Locker of this kind for key, on the name that
	// NewLocker uses for key, on a new client with its own connections,
	// as NewLocker does; o.Observer, if set, is to receive that client's
	// events. Campaigner turns an Election into a Locker.
	New func(t testing.TB, key string, o Options) dlock.Locker
}

// AnyNumber is the Kind.Holders of a kind that any number of leases may
// hold at once, such as an RWMutex's readers.
const AnyNumber = -1

// exclusive reports whether one lease of k holds the name alone.
func (k Kind) exclusive() bool { return k.Holders == 1 }

// CampaignWait is how long a TryLock of a Campaigner campaigns: an
// Election has no TryLock of its own. A second, since at 300ms an
// uncontended campaign on a loaded machine (redislock, pglock, under a
// pair of make test runs) did not lead in time; a backend that can tell
// when a campaign queues ends TryLock then (see zklock's tests).
var CampaignWait = time.Second

// Campaigner returns e as a Locker, so that RunKinds can check an Election
// against the other kinds of lock on its name: Lock campaigns, with the
// value "dlocktest"; TryLock campaigns for CampaignWait at most; a lease's
// Release resigns. Like e, it campaigns for one leadership at a time.
func Campaigner(e dlock.Election) dlock.Locker { return campaigner{e} }

type campaigner struct{ e dlock.Election }

func (c campaigner) Name() string { return c.e.Name() }

func (c campaigner) Lock(ctx context.Context) (dlock.Lease, error) {
	return c.e.Campaign(ctx, "dlocktest")
}

func (c campaigner) TryLock(ctx context.Context) (dlock.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, CampaignWait)
	defer cancel()
	return c.e.Campaign(ctx, "dlocktest")
}

// RunKinds runs, as subtests of t, the cases of a name that kinds of lock
// share, for every pair of the kinds in b.Kinds:
//
//   - Pairs: a holder of one kind, then attempts of the other. A kind of
//     another lock is refused at once, by TryLock and by Lock alike, with
//     an error matching dlock.ErrNotObtained and dlock.ErrKindMismatch, and
//     leaves nothing behind that would hold up the holder's kind: more of
//     its leases are granted, as far as the kind allows. A mode of the
//     same lock waits its turn and, waiting, stops later grants of the
//     holder's kind (a waiting writer keeps new readers out). Inspect
//     reports the holder's kind throughout, and the next kind's once it
//     holds, with a fence above every earlier one.
//   - Queued (with b.Enqueue): a holder of one kind, an entry of
//     another lock queued behind it, as an attempt leaves it until it is
//     refused, and a Lock of the holder's kind queued behind that entry:
//     the Lock is not granted past the entry, neither beside the holder
//     nor once the holder has gone, and does not fail for it; it is
//     granted once the entry goes. (A Semaphore of three permits or more
//     tells this rule from a count of the keys ahead, which two permits
//     and the entry fill already.)
//   - Nested: a name and the name extended by "/" and a segment ("a" and
//     "a/b") are two locks, of any kinds: while one holds, the other is
//     free (Inspect reports it so) and its TryLock is granted, whichever
//     is taken first.
//   - Contention: a few clients of every kind lock and release at random;
//     no two kinds ever hold at once, no kind holds beyond its number of
//     holders, and every grant's fence is above that of every earlier
//     grant of another kind (and of its own, for an exclusive kind).
//
// Each checks that nothing is left (b.Leftovers) once every lease is
// released. RunKinds uses b.Kinds, b.Inspect and b.Leftovers, which it
// requires, b.Enqueue if set, and no other field of b.
func RunKinds(t *testing.T, b Backend) {
	if len(b.Kinds) == 0 || b.Inspect == nil || b.Leftovers == nil {
		t.Fatalf("dlocktest: RunKinds needs Backend.Kinds (every kind the backend offers on a name, at least the one NewLocker makes), Inspect and Leftovers")
	}
	names := map[string]bool{}
	for _, k := range b.Kinds {
		if k.Name == "" || k.Lock == "" || k.New == nil || k.Holders == 0 || k.Holders < AnyNumber || names[k.Name] {
			t.Fatalf("dlocktest: Kind %+v: Name (one of its own), Lock, New and Holders (>= 1, or AnyNumber) are required", k)
		}
		names[k.Name] = true
	}
	s := &suite{b: b}
	t.Run("Pairs", s.kindPairs)
	t.Run("Queued", s.kindsQueued)
	t.Run("Nested", s.kindsNested)
	t.Run("Contention", s.kindContention)
}

// kindsNested runs kindNested for every kind with itself and with the
// first kind (each on the name and on the extended name, in turn).
func (s *suite) kindsNested(t *testing.T) {
	first := s.b.Kinds[0]
	for i, k := range s.b.Kinds {
		t.Run(k.Name+"-and-"+k.Name, func(t *testing.T) { s.kindNested(t, k, k) })
		if i > 0 {
			t.Run(k.Name+"-and-"+first.Name, func(t *testing.T) { s.kindNested(t, k, first) })
		}
	}
}

// kindNested: a holds the name, and b takes the name extended by "/b";
// then the other way round. See RunKinds.
func (s *suite) kindNested(t *testing.T, a, b Kind) {
	key := uniqueKey(t)
	ctx := ctxFor(t, time.Minute)
	o := Options{TTL: 10 * time.Second}
	for _, names := range [][2]string{{key, key + "/b"}, {key + "/b", key}} {
		first, second := names[0], names[1]
		held, err := a.New(t, first, o).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %s of %q: %v", a.Name, first, err)
		}
		if info := s.b.Inspect(t, second); info.Kind != dlock.KindFree {
			t.Errorf("Inspect %q while a %s holds %q = %+v; want it free: they are two locks", second, a.Name, first, info)
		}
		l, err := b.New(t, second, o).TryLock(ctx)
		if err != nil {
			t.Errorf("TryLock %s of %q while a %s holds %q: %v; want it granted: they are two locks", b.Name, second, a.Name, first, err)
		} else {
			if info := s.b.Inspect(t, first); info.Kind != a.Lock || len(info.Holders) != 1 {
				t.Errorf("Inspect %q while a %s holds it and a %s holds %q = %+v; want its %s holding alone", first, a.Name, b.Name, second, info, a.Name)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release %q: %v", second, err)
			}
		}
		if err := held.Release(ctx); err != nil {
			t.Errorf("Release %q: %v", first, err)
		}
		s.expectLeftNothing(t, first)
		s.expectLeftNothing(t, second)
	}
}

// kindPairs runs the sequence of kindPair for every ordered pair of kinds.
func (s *suite) kindPairs(t *testing.T) {
	kinds := s.b.Kinds
	if len(kinds) == 1 {
		t.Logf("the backend declares one kind of lock, %s: no pair to check", kinds[0].Name)
	}
	for _, a := range kinds {
		for _, b := range kinds {
			if a.Name != b.Name {
				t.Run(a.Name+"-then-"+b.Name, func(t *testing.T) { s.kindPair(t, a, b) })
			}
		}
	}
}

// kindPair: a holds the name, then b tries it; see RunKinds.
func (s *suite) kindPair(t *testing.T, a, b Kind) {
	key := uniqueKey(t)
	ctx := ctxFor(t, 2*time.Minute)
	o := Options{TTL: 10 * time.Second}
	var held []dlock.Lease // a's leases
	release := func() {
		for _, l := range held {
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release of %s: %v", a.Name, err)
			}
		}
	}
	top := func() (f uint64) {
		for _, l := range held {
			f = max(f, l.Fence())
		}
		return f
	}
	held = append(held, mustLock(t, ctx, a.New(t, key, o)))
	s.expectKind(t, key, a, len(held), "while "+a.Name+" holds the name")

	waiting := make(chan struct{})
	var once sync.Once
	obs := dlock.ObserverFunc(func(e dlock.Event) {
		if e.Kind == dlock.EventWaiting {
			once.Do(func() { close(waiting) })
		}
	})
	bl := b.New(t, key, Options{TTL: o.TTL, Observer: obs})
	_, err := bl.TryLock(ctx)
	other := a.Lock != b.Lock
	switch {
	case err == nil:
		t.Fatalf("TryLock of %s succeeded while %s held the name", b.Name, a.Name)
	case other && (!errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, dlock.ErrKindMismatch)):
		t.Fatalf("TryLock of %s while %s holds the name = %v; want an error matching ErrNotObtained and ErrKindMismatch", b.Name, a.Name, err)
	case !other && (!errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrKindMismatch)):
		t.Fatalf("TryLock of %s while %s (the same lock) holds the name = %v; want ErrNotObtained, not ErrKindMismatch", b.Name, a.Name, err)
	}

	if other {
		// Lock does not wait for another kind of lock: it would wait
		// behind every later lease of that kind, or hold beside them.
		lctx := ctxFor(t, 15*time.Second)
		start := time.Now()
		l, err := bl.Lock(lctx)
		took := time.Since(start)
		if err == nil {
			l.Release(ctx)
			t.Fatalf("Lock of %s succeeded while %s held the name", b.Name, a.Name)
		}
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, dlock.ErrKindMismatch) || lctx.Err() != nil || took > 10*time.Second {
			t.Fatalf("Lock of %s while %s holds the name = %v after %v; want an error matching ErrNotObtained and ErrKindMismatch, at once", b.Name, a.Name, err, took)
		}
		s.expectKind(t, key, a, len(held), "after "+b.Name+"'s Lock was refused")
		// Nothing of the refused attempts holds up the holder's kind.
		if !a.exclusive() {
			more := ctxFor(t, 10*time.Second)
			l, err := a.New(t, key, o).Lock(more)
			if err != nil {
				t.Fatalf("a second %s, after %s was refused: %v; want it granted beside the first", a.Name, b.Name, err)
			}
			held = append(held, l)
			s.expectKind(t, key, a, len(held), "while two "+a.Name+"s hold the name")
		}
		release()
		next := mustLock(t, ctx, bl)
		if next.Fence() <= top() {
			t.Errorf("the %s's fence %d is not above the %s's %d", b.Name, next.Fence(), a.Name, top())
		}
		s.expectKind(t, key, b, 1, "once the "+b.Name+" holds the name")
		if err := next.Release(ctx); err != nil {
			t.Errorf("Release of the %s: %v", b.Name, err)
		}
		s.expectLeftNothing(t, key)
		return
	}

	// A mode of the same lock waits its turn.
	type result struct {
		lease dlock.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		l, err := bl.Lock(ctx)
		done <- result{l, err}
	}()
	select {
	case <-waiting:
	case r := <-done:
		if r.err == nil {
			r.lease.Release(ctx)
		}
		t.Fatalf("Lock of %s returned (%v) while %s held the name; want it to wait", b.Name, r.err, a.Name)
	case <-time.After(10 * time.Second):
		t.Fatalf("Lock of %s while %s holds the name reported no EventWaiting within 10s", b.Name, a.Name)
	}
	if !a.exclusive() {
		// The waiter is ahead of any later lease of the holder's kind.
		if l, err := a.New(t, key, o).TryLock(ctx); err == nil {
			held = append(held, l)
			t.Errorf("TryLock of %s succeeded while %s waited for the name", a.Name, b.Name)
		} else if !errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("TryLock of %s while %s waits = %v; want ErrNotObtained", a.Name, b.Name, err)
		}
	}
	s.expectKind(t, key, a, len(held), "while "+b.Name+" waits for the name")
	select {
	case r := <-done:
		t.Fatalf("Lock of %s returned (%v) while %s held the name; want it to wait", b.Name, r.err, a.Name)
	default:
	}
	release()
	var r result
	select {
	case r = <-done:
	case <-time.After(o.TTL):
		t.Fatalf("the waiting %s was not granted %v after the %s released the name", b.Name, o.TTL, a.Name)
	}
	if r.err != nil {
		t.Fatalf("Lock of the waiting %s: %v", b.Name, r.err)
	}
	if r.lease.Fence() <= top() {
		t.Errorf("the %s's fence %d is not above the %s's %d", b.Name, r.lease.Fence(), a.Name, top())
	}
	s.expectKind(t, key, b, 1, "once the "+b.Name+" holds the name")
	if err := r.lease.Release(ctx); err != nil {
		t.Errorf("Release of the %s: %v", b.Name, err)
	}
	s.expectLeftNothing(t, key)
}

// kindsQueued runs kindQueued for every kind, with an entry of each other
// lock (one kind of each).
func (s *suite) kindsQueued(t *testing.T) {
	if s.b.Enqueue == nil {
		t.Skip("dlocktest: Backend.Enqueue is nil: the backend keeps no queue on the server")
	}
	for _, a := range s.b.Kinds {
		seen := map[dlock.Kind]bool{a.Lock: true}
		for _, b := range s.b.Kinds {
			if !seen[b.Lock] {
				seen[b.Lock] = true
				t.Run(a.Name+"-behind-"+b.Name, func(t *testing.T) { s.kindQueued(t, a, b) })
			}
		}
	}
}

// kindQueued: a holds the name, an entry of b is queued behind it, and a
// Lock of a behind that; see RunKinds.
func (s *suite) kindQueued(t *testing.T, a, b Kind) {
	key := uniqueKey(t)
	ctx := ctxFor(t, time.Minute)
	o := Options{TTL: 10 * time.Second}
	first := mustLock(t, ctx, a.New(t, key, o))
	remove := s.b.Enqueue(t, key, b)
	waiting := make(chan struct{})
	var once sync.Once
	obs := dlock.ObserverFunc(func(e dlock.Event) {
		if e.Kind == dlock.EventWaiting {
			once.Do(func() { close(waiting) })
		}
	})
	type result struct {
		lease dlock.Lease
		err   error
	}
	done := make(chan result, 1)
	next := a.New(t, key, Options{TTL: o.TTL, Observer: obs})
	go func() {
		l, err := next.Lock(ctx)
		done <- result{l, err}
	}()
	returned := func(r result, when string) {
		t.Helper()
		if r.err == nil {
			r.lease.Release(ctx)
			t.Fatalf("the second %s was granted past the entry of %s queued ahead of it, %s", a.Name, b.Name, when)
		}
		t.Fatalf("the Lock of the second %s, queued behind the entry of %s, %s: %v; want it to wait", a.Name, b.Name, when, r.err)
	}
	notYet := func(when string) {
		t.Helper()
		select {
		case r := <-done:
			returned(r, when)
		case <-time.After(200 * time.Millisecond):
		}
	}
	select {
	case <-waiting:
	case r := <-done:
		returned(r, "while the first held the name")
	case <-time.After(10 * time.Second):
		t.Fatalf("the Lock of the second %s, behind the entry of %s, reported no EventWaiting within 10s", a.Name, b.Name)
	}
	notYet("while the first held the name")
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release of the first %s: %v", a.Name, err)
	}
	notYet("once the first had released the name")
	remove()
	var r result
	select {
	case r = <-done:
	case <-time.After(o.TTL):
		t.Fatalf("the second %s was not granted %v after the entry of %s went", a.Name, o.TTL, b.Name)
	}
	if r.err != nil {
		t.Fatalf("the Lock of the second %s, once the entry of %s went: %v", a.Name, b.Name, r.err)
	}
	if r.lease.Fence() <= first.Fence() {
		t.Errorf("the second %s's fence %d is not above the first's %d", a.Name, r.lease.Fence(), first.Fence())
	}
	if err := r.lease.Release(ctx); err != nil {
		t.Errorf("Release of the second %s: %v", a.Name, err)
	}
	s.expectLeftNothing(t, key)
}

// expectKind checks that Inspect reports k's kind of lock and n holders.
func (s *suite) expectKind(t testing.TB, key string, k Kind, n int, when string) {
	t.Helper()
	info := s.b.Inspect(t, key)
	if info.Kind != k.Lock || len(info.Holders) != n {
		t.Errorf("Inspect %s = kind %q with %d holders; want %q with %d (%+v)", when, info.Kind, len(info.Holders), k.Lock, n, info)
	}
}

// expectLeftNothing checks that nothing of key stays on the server once
// every lease is released (within 5s).
func (s *suite) expectLeftNothing(t testing.TB, key string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left = s.b.Leftovers(t, key); len(left) == 0 {
			return
		}
	}
	t.Errorf("left behind once every lease was released: %v", left)
}

// kindContention: KindClients clients of every kind lock the name and
// release it, each KindRounds times; a Lock refused for another kind of
// lock tries again a moment later. A record of who holds, checked at
// every grant, must never show two kinds, nor more holders of a kind than
// it admits; and fences must increase in the order of grants across
// kinds.
func (s *suite) kindContention(t *testing.T) {
	const clients, rounds = 3, 4
	kinds := s.b.Kinds
	key := uniqueKey(t)
	ctx := ctxFor(t, 3*time.Minute)
	o := Options{TTL: 10 * time.Second}
	var (
		mu         sync.Mutex
		holding    = make([]int, len(kinds))    // leases of each kind held now
		top        = make([]uint64, len(kinds)) // the highest fence granted to each kind
		granted    = make([]int, len(kinds))
		refused    = make([]int, len(kinds)) // Locks refused for another kind of lock
		failures   []string
		lockers    = make([][]dlock.Locker, len(kinds))
		wg         sync.WaitGroup
		violations int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	// Every locker is made before any goroutine starts (see
	// releaseDuringRenewal).
	for k, kind := range kinds {
		for range clients {
			lockers[k] = append(lockers[k], kind.New(t, key, o))
		}
	}
	grant := func(k int, l dlock.Lease) {
		mu.Lock()
		defer mu.Unlock()
		kind := kinds[k]
		for j, n := range holding {
			if n > 0 && j != k {
				violations++
				failures = append(failures, fmt.Sprintf("%s (fence %d) was granted while %d of %s held the name", kind.Name, l.Fence(), n, kinds[j].Name))
			}
			if (j != k || kind.exclusive()) && top[j] > 0 && l.Fence() <= top[j] {
				violations++
				failures = append(failures, fmt.Sprintf("%s was granted fence %d after %s was granted fence %d", kind.Name, l.Fence(), kinds[j].Name, top[j]))
			}
		}
		if kind.Holders != AnyNumber && holding[k] >= kind.Holders {
			violations++
			failures = append(failures, fmt.Sprintf("%s was granted while %d of them held the name; it admits %d", kind.Name, holding[k], kind.Holders))
		}
		holding[k]++
		granted[k]++
		top[k] = max(top[k], l.Fence())
	}
	for k, ls := range lockers {
		for i, l := range ls {
			wg.Go(func() {
				for r := 0; r < rounds; {
					lease, err := l.Lock(ctx)
					switch {
					case errors.Is(err, dlock.ErrKindMismatch) && ctx.Err() == nil:
						mu.Lock()
						refused[k]++
						mu.Unlock()
						time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
						continue
					case err != nil:
						fail("%s client %d: Lock: %v", kinds[k].Name, i, err)
						return
					}
					grant(k, lease)
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					mu.Lock()
					holding[k]--
					mu.Unlock()
					if err := lease.Release(ctx); err != nil {
						fail("%s client %d: Release: %v", kinds[k].Name, i, err)
					}
					r++
				}
			})
		}
	}
	wg.Wait()
	for k, kind := range kinds {
		t.Logf("%s: %d grants, %d Locks refused for another kind", kind.Name, granted[k], refused[k])
	}
	for _, f := range failures {
		t.Error(f)
	}
	if violations > 0 {
		t.Errorf("%d violations of one kind at a time, or of fence order, in %d grants", violations, len(kinds)*clients*rounds)
	}
	s.expectLeftNothing(t, key)
}
