package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// lockAsync starts l.Lock(ctx) and returns where its outcome arrives.
func lockAsync(ctx context.Context, l dlock.Locker) <-chan dlock.Lease {
	ch := make(chan dlock.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx)
		if err != nil {
			lease = nil
		}
		ch <- lease
	}()
	return ch
}

// expectWaiting checks that nothing arrives on ch for a moment.
func expectWaiting(t *testing.T, ch <-chan dlock.Lease, what string) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("%s: granted (%v) while it should wait", what, l != nil)
	case <-time.After(200 * time.Millisecond):
	}
}

func expectGranted(t *testing.T, ch <-chan dlock.Lease, what string) dlock.Lease {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.Fatalf("%s: Lock failed", what)
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted", what)
	}
	return nil
}

func TestIntegrationRWMutex(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	name := "kinds/" + t.Name()
	rw := func() *etcdlock.RWMutex {
		return connect(t, []string{e.Addr()}).NewRWMutex(name, etcdlock.WithTTL(5*time.Second))
	}
	a, b, w, late := rw(), rw(), rw(), rw()
	r1, err := a.Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Reader().TryLock(ctx)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := w.Writer().TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("writer TryLock with readers in = %v; want ErrNotObtained", err)
	}
	if _, err := a.Writer().Lock(r1.Context()); !errors.Is(err, etcdlock.ErrUpgrade) {
		t.Errorf("writer through a read lease's Context = %v; want ErrUpgrade", err)
	}
	info, err := connect(t, []string{e.Addr()}).Inspect(ctx, name)
	if err != nil || info.Kind != dlock.KindRWMutex || len(info.Holders) != 2 || info.Holders[0].Mode != dlock.ModeRead || info.TTL <= 0 {
		t.Errorf("Inspect with two readers = %+v, %v", info, err)
	}
	wch := lockAsync(ctx, w.Writer())
	expectWaiting(t, wch, "writer behind readers")
	rch := lockAsync(ctx, late.Reader())
	expectWaiting(t, rch, "reader behind a waiting writer")
	r1.Release(ctx)
	expectWaiting(t, wch, "writer behind one reader")
	r2.Release(ctx)
	wl := expectGranted(t, wch, "writer")
	if wl.Fence() <= max(r1.Fence(), r2.Fence()) {
		t.Errorf("writer's fence %d not above the readers' %d, %d", wl.Fence(), r1.Fence(), r2.Fence())
	}
	expectWaiting(t, rch, "reader behind the writer")
	wl.Release(ctx)
	rl := expectGranted(t, rch, "late reader")
	if rl.Fence() <= wl.Fence() {
		t.Errorf("reader's fence %d not above the writer's %d", rl.Fence(), wl.Fence())
	}
	rl.Release(ctx)
}

func TestIntegrationSemaphore(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	name := "kinds/" + t.Name()
	sem := func() *etcdlock.Semaphore {
		return connect(t, []string{e.Addr()}).NewSemaphore(name, 2, etcdlock.WithTTL(5*time.Second))
	}
	s1, s2, s3 := sem(), sem(), sem()
	p1, err := s1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s2.TryLock(ctx)
	if err != nil {
		t.Fatalf("second permit: %v", err)
	}
	if _, err := s3.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("third TryLock = %v; want ErrNotObtained", err)
	}
	if _, err := connect(t, []string{e.Addr()}).NewSemaphore(name, 3).TryLock(ctx); err == nil || errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("Semaphore of 3 on a semaphore of 2 = %v; want an error naming both", err)
	}
	info, err := connect(t, []string{e.Addr()}).Inspect(ctx, name)
	if err != nil || info.Kind != dlock.KindSemaphore || info.PermitLimit != 2 || len(info.Holders) != 2 {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
	ch := lockAsync(ctx, s3)
	expectWaiting(t, ch, "third permit")
	p1.Release(ctx)
	p3 := expectGranted(t, ch, "third permit")
	if p3.Fence() <= max(p1.Fence(), p2.Fence()) {
		t.Errorf("fence %d not above %d, %d", p3.Fence(), p1.Fence(), p2.Fence())
	}
	p2.Release(ctx)
	p3.Release(ctx)
}

func TestIntegrationKindMismatchAndReentry(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	name := "kinds/" + t.Name()
	c := connect(t, []string{e.Addr()})
	m := c.NewMutex(name)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(l.Context()); !errors.Is(err, etcdlock.ErrNotReentrant) {
		t.Errorf("Lock through the lease's Context = %v; want ErrNotReentrant", err)
	}
	other := connect(t, []string{e.Addr()})
	for _, lk := range []dlock.Locker{other.NewRWMutex(name).Writer(), other.NewSemaphore(name, 2)} {
		_, err := lk.TryLock(ctx)
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, etcdlock.ErrKindMismatch) {
			t.Errorf("TryLock of another kind = %v; want ErrNotObtained and ErrKindMismatch", err)
		}
	}
	l.Release(ctx)
}

func TestIntegrationForceUnlock(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	name := "kinds/" + t.Name()
	const ttl = 900 * time.Millisecond
	admin := connect(t, []string{e.Addr()})
	if info, err := admin.Inspect(ctx, name); err != nil || info.Kind != dlock.KindFree || info.Held() {
		t.Fatalf("Inspect of a free name = %+v, %v", info, err)
	}
	holder, err := connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := lockAsync(ctx, connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(ttl)))
	expectWaiting(t, ch, "waiter")
	info, err := admin.Inspect(ctx, name)
	if err != nil || info.Waiters != 1 || len(info.Holders) != 1 || info.Holders[0].Fence != holder.Fence() {
		t.Errorf("Inspect = %+v, %v; want the holder and one waiter", info, err)
	}
	ok, err := admin.ForceUnlock(ctx, name)
	if err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	next := expectGranted(t, ch, "waiter after ForceUnlock")
	select {
	case <-holder.Done():
	case <-time.After(ttl/3 + time.Second):
		t.Fatal("old holder not told within a renewal period")
	}
	if err := holder.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTakenOver) {
		t.Errorf("old holder's Err = %v; want ErrLost and ErrTakenOver", err)
	}
	next.Release(ctx)
}

// A permit is not granted past a key of another kind queued ahead of it
// (issue 31): a Semaphore permit holds; etcd's own concurrency.Mutex, which
// knows nothing of kinds, queues behind it; a second permit then waits
// behind that Mutex, which is granted when the first permit goes, alone,
// and the second permit after it, with a higher fence. Inspect reports
// the holder's kind, and the keys of the other kind as waiters, at every
// step. Before the fix the second permit was granted beside the first, and
// the Mutex beside the second.
func TestIntegrationPermitWaitsBehindAnotherKind(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	cli := dial(t, e.Addr())
	name := "kinds/" + t.Name()
	admin := connect(t, []string{e.Addr()})
	sem := func() *etcdlock.Semaphore {
		return connect(t, []string{e.Addr()}).NewSemaphore(name, 5, etcdlock.WithTTL(5*time.Second))
	}
	inspect := func(kind dlock.Kind, holders, waiters int, when string) {
		t.Helper()
		info, err := admin.Inspect(ctx, name)
		if err != nil || info.Kind != kind || len(info.Holders) != holders || info.Waiters != waiters {
			t.Errorf("Inspect %s = %+v, %v; want a %s with %d holders and %d waiters", when, info, err, kind, holders, waiters)
		}
	}
	p1, err := sem().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	session, err := concurrency.NewSession(dial(t, e.Addr()), concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	cm := concurrency.NewMutex(session, name)
	cmGot := make(chan error, 1)
	go func() { cmGot <- cm.Lock(ctx) }()
	waitKeys(t, cli, name+"/", 2)
	inspect(dlock.KindSemaphore, 1, 1, "with a Mutex queued behind a permit")

	p2ch := lockAsync(ctx, sem())
	waitKeys(t, cli, name+"/", 3)
	expectWaiting(t, p2ch, "a permit behind a queued Mutex")
	inspect(dlock.KindSemaphore, 1, 2, "with a Mutex and a permit queued behind a permit")
	select {
	case err := <-cmGot:
		t.Fatalf("concurrency Lock returned %v while a permit held the name", err)
	default:
	}

	if err := p1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cmGot:
		if err != nil {
			t.Fatalf("concurrency Lock after the permit's release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued Mutex was not granted after the permit's release")
	}
	expectWaiting(t, p2ch, "a permit behind a Mutex that holds")
	inspect(dlock.KindMutex, 1, 1, "with a permit queued behind a Mutex")
	cmRev := createRevision(t, cli, cm.Key())
	if err := cm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	p2 := expectGranted(t, p2ch, "the permit behind the Mutex")
	if p2.Fence() <= uint64(cmRev) || cmRev <= int64(p1.Fence()) {
		t.Errorf("fences in grant order: permit %d, Mutex %d, permit %d; want increasing", p1.Fence(), cmRev, p2.Fence())
	}
	inspect(dlock.KindSemaphore, 1, 0, "with one permit")
	p2.Release(ctx)
}

// A permit waiting behind n others is granted when one of them goes, and
// not only when so few keys are left that the keys behind it fit too: a
// permit counts only the keys ahead of it. (etcd counts a range before it
// filters it by revision, so a count of the keys up to the permit's own
// counted every key.)
func TestIntegrationPermitCountsOnlyKeysAhead(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	name := "kinds/" + t.Name()
	sem := func() *etcdlock.Semaphore {
		return connect(t, []string{e.Addr()}).NewSemaphore(name, 2, etcdlock.WithTTL(5*time.Second))
	}
	p1, err := sem().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cli := dial(t, e.Addr())
	p3ch := lockAsync(ctx, sem())
	waitKeys(t, cli, name+"/", 3)
	p4ch := lockAsync(ctx, sem())
	waitKeys(t, cli, name+"/", 4)
	expectWaiting(t, p3ch, "a third permit")
	p1.Release(ctx)
	p3 := expectGranted(t, p3ch, "the third permit, once the first went")
	expectWaiting(t, p4ch, "a fourth permit")
	p2.Release(ctx)
	p4 := expectGranted(t, p4ch, "the fourth permit, once the second went")
	p3.Release(ctx)
	p4.Release(ctx)
}

// A Semaphore of another number of permits is refused by the first look
// only, and counts as another kind of lock for a permit already queued: a
// Semaphore(1) waiting for its holder, with a Semaphore(2)'s key queued
// ahead of it as an attempt leaves it until it is refused, waits for that
// key once the holder has gone, and is granted when it goes. Before, the
// waiter failed as soon as that key was the oldest ("has 2 permits; this
// one asks for 1"), though it was only an attempt on its way out.
func TestIntegrationSemaphoreWaiterBesideAnotherSize(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	cli := dial(t, e.Addr())
	name := "kinds/" + t.Name()
	sem := func(n int) *etcdlock.Semaphore {
		return connect(t, []string{e.Addr()}).NewSemaphore(name, n, etcdlock.WithTTL(5*time.Second))
	}
	holder, err := sem(1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := cli.Grant(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, fmt.Sprintf("%s/permits-2/%x", name, int64(gr.ID)), "", clientv3.WithLease(gr.ID)); err != nil {
		t.Fatal(err)
	}
	wch := lockAsync(ctx, sem(1))
	waitKeys(t, cli, name+"/", 3)
	expectWaiting(t, wch, "a Semaphore(1) behind its holder and a Semaphore(2)'s key")
	start := time.Now()
	if _, err := sem(2).Lock(ctx); err == nil || !strings.Contains(err.Error(), "has 1 permits") || time.Since(start) > 5*time.Second {
		t.Errorf("Semaphore(2).Lock while a Semaphore(1) holds = %v after %v; want its refusal at once", err, time.Since(start))
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expectWaiting(t, wch, "a Semaphore(1) behind a Semaphore(2)'s key, once its holder went")
	if _, err := cli.Revoke(ctx, gr.ID); err != nil {
		t.Fatal(err)
	}
	expectGranted(t, wch, "the Semaphore(1), once the Semaphore(2)'s key went").Release(ctx)
}

// A lock asked under the Context of a lease of another kind on the same
// name, from the same Client, is refused as another kind held by anyone
// is: with an error matching dlock.ErrKindMismatch and
// dlock.ErrNotObtained, at once. Before, a Mutex or an RWMutex side asked
// under a permit's or a Mutex's lease got ErrNotReentrant ("ctx already
// holds it").
func TestIntegrationAnotherKindUnderAHoldersContext(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{e.Addr()})
	name := "kinds/" + t.Name()
	kinds := []struct {
		name string
		make func() dlock.Locker
	}{
		{"Mutex", func() dlock.Locker { return c.NewMutex(name) }},
		{"RWMutex.read", func() dlock.Locker { return c.NewRWMutex(name).Reader() }},
		{"RWMutex.write", func() dlock.Locker { return c.NewRWMutex(name).Writer() }},
		{"Semaphore", func() dlock.Locker { return c.NewSemaphore(name, 2) }},
	}
	for _, a := range kinds {
		held, err := a.make().Lock(ctx)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		for _, b := range kinds {
			if b.name == a.name || strings.HasPrefix(a.name, "RWMutex") && strings.HasPrefix(b.name, "RWMutex") {
				continue
			}
			for _, try := range []bool{true, false} {
				lctx, cancel := context.WithTimeout(held.Context(), 10*time.Second)
				start := time.Now()
				var l dlock.Lease
				if try {
					l, err = b.make().TryLock(lctx)
				} else {
					l, err = b.make().Lock(lctx)
				}
				cancel()
				if l != nil {
					l.Release(ctx)
				}
				if !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) || time.Since(start) > 5*time.Second {
					t.Errorf("%s of a %s under a %s lease's Context = %v after %v; want ErrKindMismatch and ErrNotObtained at once",
						map[bool]string{true: "TryLock", false: "Lock"}[try], b.name, a.name, err, time.Since(start))
				}
			}
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
