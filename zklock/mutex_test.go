package zklock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// waitChildren waits until path has n children and returns them.
func waitChildren(t *testing.T, c *zk.Conn, path string, n int) []string {
	t.Helper()
	var kids []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		// A Semaphore's locks and leases (Curator's layout) are no queue's.
		if kids = slices.DeleteFunc(children(t, c, path), func(k string) bool { return k == "locks" || k == "leases" }); len(kids) == n {
			return kids
		}
	}
	t.Fatalf("%s has children %v; want %d", path, kids, n)
	return nil
}

// Waiters get the lock in the order they queued, each from its own
// session.
func TestIntegrationMutexFIFO(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	holder, err := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		m := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path)
		wg.Go(func() {
			lease, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			lease.Release(ctx)
		})
		waitChildren(t, adm, path, i+2) // waiter i has queued before waiter i+1 starts
	}
	holder.Release(ctx)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("acquisition order %v; want 0..%d", order, waiters-1)
		}
	}
}

// A release wakes the next waiter and nobody else: the ensemble keeps one
// watch per queued node, each from the session just behind it, and one
// release delivers one notification.
func TestIntegrationMutexWakesOnlyTheSuccessor(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	holder, err := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 10
	var (
		events [waiters]atomic.Int32 // node notifications per waiter's session
		got    = make(chan int, waiters)
		leases = make(chan dlock.Lease, waiters)
	)
	for i := range waiters {
		s := connect(t, []string{sharedZK(t).Addr()}, zklock.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNodeDataChanged || ev.Type == zk.EventNodeChildrenChanged {
				events[i].Add(1)
			}
		}))
		m := s.NewMutex(path)
		go func() {
			lease, err := m.Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			leases <- lease
			got <- i
		}()
		waitChildren(t, adm, path, i+2)
	}
	// Each queued node but the last is watched by exactly one session.
	kids := children(t, adm, path)
	var watches map[string]int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if watches = watchedPaths(t, path); len(watches) == waiters {
			break
		}
	}
	if len(watches) != waiters {
		t.Fatalf("watched paths %v; want the %d nodes ahead of a waiter, once each", watches, waiters)
	}
	for p, n := range watches {
		if n != 1 {
			t.Errorf("%s is watched by %d sessions; want 1", p, n)
		}
	}
	if len(kids) != waiters+1 {
		t.Fatalf("children %v", kids)
	}

	holder.Release(ctx)
	first := <-got
	time.Sleep(300 * time.Millisecond) // time for any stray notification to arrive
	total := 0
	for i := range events {
		total += int(events[i].Load())
	}
	if first != 0 || total != 1 || events[0].Load() != 1 {
		t.Errorf("after one release: waiter %d got the lock, %d notifications (waiter 0: %d); want waiter 0 and exactly 1",
			first, total, events[0].Load())
	}
	(<-leases).Release(ctx)
	for range waiters - 1 {
		<-got
		(<-leases).Release(ctx)
	}
	total = 0
	for i := range events {
		total += int(events[i].Load())
	}
	if total != waiters {
		t.Errorf("%d notifications for %d hand-overs; want one each", total, waiters)
	}
}

// watchedPaths returns, for each watched path under dir, how many sessions
// watch it, from the server's own list (wchp).
func watchedPaths(t *testing.T, dir string) map[string]int {
	t.Helper()
	out, err := sharedZK(t).FourLetter("wchp")
	if err != nil {
		t.Fatal(err)
	}
	watches := map[string]int{}
	current := ""
	for line := range strings.Lines(out) {
		switch {
		case strings.HasPrefix(line, "/"):
			current = strings.TrimSpace(line)
			if !strings.HasPrefix(current, dir+"/") {
				current = ""
			}
		case current != "" && strings.HasPrefix(strings.TrimSpace(line), "0x"):
			watches[current]++
		}
	}
	return watches
}

// A waiter whose context ends deletes its node: the queue is as it was.
func TestIntegrationMutexCancelledWaiterLeavesNoNode(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	holder, err := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path)
	for _, d := range []time.Duration{0, time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		wctx, cancel := context.WithTimeout(ctx, d)
		_, err := waiter.Lock(wctx)
		cancel()
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with %v to wait = %v; want ErrNotObtained and DeadlineExceeded", d, err)
		}
	}
	waitChildren(t, adm, path, 1)
	if kids := children(t, adm, path); !strings.HasSuffix(holder.(*zklock.Lease).Path(), kids[0]) {
		t.Errorf("the node left is %v; want the holder's %s", kids, holder.(*zklock.Lease).Path())
	}
	holder.Release(ctx)
	waitChildren(t, adm, path, 0)
}

// A ReentrantMutex re-enters by owner: the lease's Context, or
// dlock.WithOwner; a plain Mutex of another Client on the path waits.
func TestIntegrationReentrantMutex(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	s := connect(t, []string{sharedZK(t).Addr()})
	m := s.NewReentrantMutex(path)
	other := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path)

	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.TryLock(outer.Context())
	if err != nil {
		t.Fatalf("TryLock under the lease's Context: %v", err)
	}
	if inner.Fence() != outer.Fence() || inner.Token() != outer.Token() {
		t.Errorf("inner hold: fence %d token %s; want the outer's %d %s", inner.Fence(), inner.Token(), outer.Fence(), outer.Token())
	}
	if kids := children(t, adm, path); len(kids) != 1 {
		t.Errorf("children %v; re-entry must not create a node", kids)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner.Err(), dlock.ErrReleased) || outer.Err() != nil {
		t.Errorf("after the inner Release: inner %v, outer %v", inner.Err(), outer.Err())
	}
	if _, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("another session's TryLock while the outer hold stands = %v", err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, adm, path, 0)

	// An owner of one's choosing, across two separate Lock calls.
	octx := dlock.WithOwner(ctx, "worker-7")
	a, err := m.Lock(octx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Lock(octx)
	if err != nil || b.Token() != "worker-7" || a.Fence() != b.Fence() {
		t.Fatalf("second Lock with the same owner = %v, %v", b, err)
	}
	a.Release(ctx)
	b.Release(ctx)
	waitChildren(t, adm, path, 0)

	// A held lock whose node is lost ends every hold.
	a, _ = m.Lock(ctx)
	b, _ = m.Lock(a.Context())
	for _, kid := range children(t, adm, path) {
		adm.Delete(path+"/"+kid, -1)
	}
	for _, l := range []dlock.Lease{a, b} {
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a hold outlived its node")
		}
		if !errors.Is(l.Err(), dlock.ErrTakenOver) {
			t.Errorf("Err = %v; want ErrTakenOver", l.Err())
		}
	}
	if _, err := m.Lock(a.Context()); err == nil {
		t.Error("re-entered a lost lock")
	}
}

// go-zookeeper's own zk.Lock and a zklock.Mutex exclude each other.
func TestIntegrationMutexExcludesZkLock(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	peer := zk.NewLock(admin(t, []string{sharedZK(t).Addr()}), path, zk.WorldACL(zk.PermAll))
	if err := peer.Lock(); err != nil {
		t.Fatal(err)
	}
	m := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path)
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock while zk.Lock holds = %v", err)
	}
	got := make(chan dlock.Lease)
	go func() {
		lease, err := m.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	time.Sleep(100 * time.Millisecond)
	if err := peer.Unlock(); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	locked := make(chan error)
	go func() { locked <- peer.Lock() }()
	select {
	case err := <-locked:
		t.Fatalf("zk.Lock got the lock while a Mutex held it (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	lease.Release(ctx)
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	peer.Unlock()
}

// The lock's parent is a container node: the ensemble deletes it once it
// is empty, and fences keep increasing when it comes back.
func TestIntegrationFenceAfterParentReaped(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	m := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path)
	var last uint64
	for round := range 3 {
		lease, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, lease.Fence(), last)
		}
		last = lease.Fence()
		lease.Release(ctx)
		reaped := false
		for deadline := time.Now().Add(3 * testenv.ZooKeeperContainerCheck); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if ok, _, err := adm.Exists(path); err == nil && !ok {
				reaped = true
				break
			}
		}
		if !reaped {
			t.Fatalf("round %d: the empty parent %s was not reaped", round, path)
		}
	}
}

// One path serves one kind of lock, and the error says which.
func TestIntegrationKindsDoNotMix(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{sharedZK(t).Addr()})
	for _, tt := range []struct {
		first  func(path string) dlock.Locker
		second func(path string) dlock.Locker
		want   string
	}{
		{func(p string) dlock.Locker { return s.NewMutex(p) }, func(p string) dlock.Locker { return s.NewRWMutex(p).Reader() }, "used by a Mutex"},
		{func(p string) dlock.Locker { return s.NewRWMutex(p).Writer() }, func(p string) dlock.Locker { return s.NewMutex(p) }, "used by a RWMutex writer"},
		{func(p string) dlock.Locker { return s.NewSemaphore(p, 2) }, func(p string) dlock.Locker { return s.NewSemaphore(p, 3) }, "has 2 permits"},
		{func(p string) dlock.Locker { return s.NewMutex(p) }, func(p string) dlock.Locker { return s.NewSemaphore(p, 3) }, "used by a Mutex"},
	} {
		path := uniquePath(t)
		held, err := tt.first(path).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"TryLock", "Lock"} {
			l := tt.second(path)
			f := l.Lock
			if op == "TryLock" {
				f = l.TryLock
			}
			_, err := f(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s on %s: %v; want an error mentioning %q", op, path, err, tt.want)
			}
			if kinds := !strings.Contains(tt.want, "permits"); kinds != errors.Is(err, dlock.ErrKindMismatch) {
				t.Errorf("%s on %s: %v; errors.Is(err, dlock.ErrKindMismatch) = %v, want %v", op, path, err, !kinds, kinds)
			}
		}
		held.Release(ctx)
		waitChildren(t, admin(t, []string{sharedZK(t).Addr()}), path, 0)
	}
	// A node no lock made (the path of the lock path/config, or a node of
	// the user's) holds nothing: it is left out, as Curator leaves it out.
	path := uniquePath(t)
	adm := admin(t, []string{sharedZK(t).Addr()})
	if _, err := adm.CreateContainer(path, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Create(path+"/config", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l, err := s.NewMutex(path).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a path with a foreign node = %v; want it granted", err)
	}
	l.Release(ctx)
}
