package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
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
