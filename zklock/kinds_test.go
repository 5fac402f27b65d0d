package zklock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A permit is not granted past a node of another kind of lock queued
// ahead of it (issue 31): a Semaphore permit holds; a Mutex's node, as a
// Curator InterProcessMutex that knows nothing of kinds would queue it,
// comes behind it; a second permit then waits behind that node, which
// holds once the first permit goes, and the second permit holds when it
// goes, with a higher fence. Inspect reports the holder's kind, and the
// nodes behind it as waiters, at every step. Before, the second permit's
// Lock failed with ErrKindMismatch, although its own kind held the path,
// and Inspect called the path unknown.
func TestIntegrationPermitWaitsBehindAnotherKind(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	adm := admin(t, servers)
	op := connect(t, servers)
	sem := func() *zklock.Semaphore { return connect(t, servers).NewSemaphore(path, 5) }
	expect := func(kind dlock.Kind, holders, waiters int, when string) {
		t.Helper()
		if info := inspect(t, op, path); info.Kind != kind || len(info.Holders) != holders || info.Waiters != waiters {
			t.Errorf("Inspect %s = %+v; want a %s with %d holders and %d waiters", when, info, kind, holders, waiters)
		}
	}
	p1, err := sem().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mutex, err := admin(t, servers).Create(path+"/_c_00-lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	expect(dlock.KindSemaphore, 1, 1, "with a Mutex's node queued behind a permit")

	type result struct {
		lease dlock.Lease
		err   error
	}
	p2ch := make(chan result, 1)
	go func() {
		l, err := sem().Lock(ctx)
		p2ch <- result{l, err}
	}()
	waitChildren(t, adm, path, 3)
	waiting := func(what string) {
		t.Helper()
		select {
		case r := <-p2ch:
			t.Fatalf("%s: the second permit's Lock returned (%v, %v); want it to wait", what, r.lease, r.err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	waiting("behind a queued Mutex's node")
	expect(dlock.KindSemaphore, 1, 2, "with a Mutex's node and a permit queued behind a permit")

	if err := p1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, adm, path, 2)
	waiting("behind a Mutex's node that holds")
	expect(dlock.KindMutex, 1, 1, "with a permit queued behind a Mutex's node")
	if err := adm.Delete(mutex, -1); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-p2ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the second permit was not granted once the Mutex's node went")
	}
	if r.err != nil {
		t.Fatalf("the second permit: %v", r.err)
	}
	if r.lease.Fence() <= p1.Fence() {
		t.Errorf("the second permit's fence %d is not above the first's %d", r.lease.Fence(), p1.Fence())
	}
	expect(dlock.KindSemaphore, 1, 0, "with one permit")
	r.lease.Release(ctx)
}

// A Lock already queued behind its own kind keeps its place when a lock
// of another kind tries the path behind it: the newcomer is refused, with
// an error matching dlock.ErrNotObtained and dlock.ErrKindMismatch, and
// the waiter is granted in turn. (Before, a waiter whose next listing
// showed another kind's node, even one behind it, failed too.)
func TestIntegrationWaiterKeepsItsPlace(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	adm := admin(t, servers)
	holder, err := connect(t, servers).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := connect(t, servers).NewMutex(path).Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	waitChildren(t, adm, path, 2)
	// A reader's node behind the waiter, as an attempt leaves it until it
	// gives up: it outlives the holder here.
	if _, err := adm.Create(path+"/_c_00-read-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, servers).NewSemaphore(path, 2).Lock(ctx); !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("a Semaphore's Lock on a path a Mutex holds = %v; want ErrKindMismatch and ErrNotObtained", err)
	}
	holder.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the waiting Mutex, with another kind's node behind it: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Mutex was not granted")
	}
}

// A Semaphore of another number of permits is refused at once by the
// first look, and counts as another kind of lock for a waiter that finds
// its node queued beside it, as an attempt leaves it until it is refused:
// a waiter of one permit waits for such a node ahead of it, ignores one
// behind it, and is granted in turn. Before, any listing that showed a
// node of another size failed the waiter: a Semaphore(1) that waited for
// its own kind's holder returned "has 2 permits ... made with 1".
func TestIntegrationSemaphoreWaiterBesideAnotherSize(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	adm := admin(t, servers)
	sem := func(n int) *zklock.Semaphore { return connect(t, servers).NewSemaphore(path, n) }
	holder, err := sem(1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A Semaphore(2)'s node, queued behind the holder.
	ahead, err := adm.Create(path+"/_c_00-permit2-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := sem(1).Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	waitChildren(t, adm, path, 3)
	waiting := func(when string) {
		t.Helper()
		select {
		case err := <-got:
			t.Fatalf("the waiting Semaphore(1), %s: Lock returned %v; want it to wait", when, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	waiting("behind a Semaphore(2)'s node")
	// A Semaphore(2)'s attempt: refused, and its node, behind the waiter,
	// goes.
	start := time.Now()
	if _, err := sem(2).Lock(ctx); err == nil || !strings.Contains(err.Error(), "has 1 permits") || time.Since(start) > 5*time.Second {
		t.Errorf("Semaphore(2).Lock while a Semaphore(1) holds = %v after %v; want its refusal at once", err, time.Since(start))
	}
	waiting("once a Semaphore(2) tried the path")
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waiting("with a Semaphore(2)'s node lowest")
	if err := adm.Delete(ahead, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting Semaphore(1): %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Semaphore(1) was not granted once the Semaphore(2)'s node went")
	}
}
