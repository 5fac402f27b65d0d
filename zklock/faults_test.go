package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// kill -9 of the ensemble leader while a lock is held: the session
// survives the election, so the holder keeps the lock throughout, and the
// waiter proceeds after the release.
func TestIntegrationLeaderKillKeepsTheLock(t *testing.T) {
	t.Parallel() // on servers of its own, mostly waiting
	e := testenv.StartEnsemble(t, 3)
	ctx := ctxFor(t, 2*time.Minute)
	path := uniquePath(t)
	// A 15s session: a lease is confirmed for 5s at a time, which outlasts
	// an election on a loaded machine.
	holder, err := connect(t, e.Addrs(), zklock.WithSessionTimeout(15*time.Second)).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiter := connect(t, e.Addrs(), zklock.WithSessionTimeout(15*time.Second)).NewMutex(path)
	got := make(chan dlock.Lease, 1)
	go func() {
		lease, err := waiter.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	waitChildren(t, admin(t, e.Addrs()), path, 2)

	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	for {
		if l, err := e.Leader(); err == nil && l != leader {
			t.Logf("new leader %s %v after kill -9 of %s", l.Addr(), time.Since(killed).Round(time.Millisecond), leader.Addr())
			break
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatal("no new leader within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Hold on through the election and past two confirmation periods.
	select {
	case <-holder.Done():
		t.Fatalf("the holder lost its lock to a leader election: %v", holder.Err())
	case lease := <-got:
		t.Fatalf("the waiter got the lock (fence %d) while the holder held it", lease.Fence())
	case <-time.After(6 * time.Second):
	}
	if u := time.Until(holder.Until()); u <= 0 {
		t.Fatalf("the holder's Until is %v in the past", -u)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release after the election: %v", err)
	}
	select {
	case lease := <-got:
		if lease.Fence() <= holder.Fence() {
			t.Errorf("waiter's fence %d after the holder's %d", lease.Fence(), holder.Fence())
		}
		lease.Release(ctx)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not get the lock after the release")
	}
}

// A holder cut off from the ensemble: its lease ends (Done, ErrLost) by
// Until, well before the ensemble expires its session; only then does the
// next client get the lock, with a larger fence. When the holder's link
// comes back, its session is reported expired and the Client goes on
// with a new one.
func TestIntegrationSessionExpiry(t *testing.T) {
	t.Parallel() // on a server of its own, mostly waiting
	z := testenv.StartZooKeeper(t)
	proxy := testenv.StartProxy(t, z.Addr())
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	hs := connect(t, []string{proxy.Addr()})
	holder, err := hs.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := connect(t, []string{z.Addr()}).NewMutex(path)
	got := make(chan time.Time, 1)
	var next dlock.Lease
	go func() {
		lease, err := other.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		next = lease
		got <- time.Now()
	}()
	waitChildren(t, admin(t, []string{z.Addr()}), path, 2)

	cut := time.Now()
	proxy.Blackhole(true)
	var lost time.Time
	select {
	case <-holder.Done():
		lost = time.Now()
	case <-time.After(testSessionTimeout):
		t.Fatal("the cut-off holder's lease outlived its session timeout")
	}
	if late := lost.Sub(holder.Until()); late > dlocktest.Slack {
		t.Errorf("Done closed %v after Until", late)
	}
	if !errors.Is(holder.Err(), dlock.ErrLost) || !errors.Is(holder.Err(), dlock.ErrExpired) {
		t.Errorf("Err = %v; want ErrLost wrapping ErrExpired", holder.Err())
	}
	var granted time.Time
	select {
	case granted = <-got:
	case <-time.After(3 * testSessionTimeout):
		t.Fatal("the next client did not get the lock after the holder's session expired")
	}
	t.Logf("cut at 0, holder told at %v, next holder granted at %v (session timeout %v)",
		lost.Sub(cut).Round(time.Millisecond), granted.Sub(cut).Round(time.Millisecond), hs.Timeout())
	if !lost.Before(granted) {
		t.Errorf("next holder granted at %v, before the old holder was told at %v", granted.Sub(cut), lost.Sub(cut))
	}
	// The ensemble expires the session T after it last heard from the
	// holder, at most one confirmation period (T/9) or ping (T/3) before
	// the cut.
	if granted.Sub(cut) < hs.Timeout()*2/3 {
		t.Errorf("next holder granted %v after the cut; the session cannot have expired yet", granted.Sub(cut))
	}
	if next.Fence() <= holder.Fence() {
		t.Errorf("next fence %d after %d", next.Fence(), holder.Fence())
	}

	old := hs.ID()
	proxy.Blackhole(false)
	proxy.Reset()
	for deadline := time.Now().Add(20 * time.Second); hs.ID() == old || hs.ID() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder's Session did not get a new session")
		}
	}
	next.Release(ctx)
	again, err := hs.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on the new session: %v", err)
	}
	if again.Fence() <= next.Fence() {
		t.Errorf("fence %d after %d", again.Fence(), next.Fence())
	}
	again.Release(ctx)
}

// A connection that drops and comes back within the lease: every lease
// reports the suspension while it lasts, and holds on afterwards.
func TestIntegrationSuspendedAndBack(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	proxy := testenv.StartProxy(t, z.Addr())
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(30*time.Second))
	var leases []*zklock.Lease
	for i := range 3 {
		lease, err := s.NewMutex(fmt.Sprintf("%s-%d", uniquePath(t), i)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease.(*zklock.Lease))
	}
	id := s.ID()
	proxy.SetRefuse(true)
	proxy.Reset()
	for deadline := time.Now().Add(5 * time.Second); !s.Suspended(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Session not suspended after its connection was reset")
		}
	}
	for _, l := range leases {
		if !l.Suspended() || l.Err() != nil {
			t.Errorf("lease during the outage: Suspended %v, Err %v; want suspended and held", l.Suspended(), l.Err())
		}
	}
	proxy.SetRefuse(false)
	for deadline := time.Now().Add(10 * time.Second); s.Suspended(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Session still suspended 10s after the link came back")
		}
	}
	if s.ID() != id {
		t.Fatalf("session %x became %x; want the same session back", id, s.ID())
	}
	for _, l := range leases {
		if err := l.Refresh(ctx); err != nil || l.Suspended() {
			t.Errorf("lease after the outage: Refresh %v, Suspended %v", err, l.Suspended())
		}
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A waiter whose session expires while it waits loses its place, queues
// again on the new session, and still gets the lock.
func TestIntegrationWaiterOutlivesItsSession(t *testing.T) {
	t.Parallel() // on a server of its own, mostly waiting
	z := testenv.StartZooKeeper(t)
	proxy := testenv.StartProxy(t, z.Addr())
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	adm := admin(t, []string{z.Addr()})
	holder, err := connect(t, []string{z.Addr()}).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := connect(t, []string{proxy.Addr()})
	got := make(chan dlock.Lease, 1)
	go func() {
		lease, err := ws.NewMutex(path).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	waitChildren(t, adm, path, 2)
	old := ws.ID()
	proxy.SetRefuse(true)
	proxy.Reset()
	waitChildren(t, adm, path, 1) // the ensemble expired the waiter's session
	proxy.SetRefuse(false)
	waitChildren(t, adm, path, 2) // and it queued again
	if ws.ID() == old {
		t.Errorf("the waiter still reports session %x", old)
	}
	holder.Release(ctx)
	select {
	case lease := <-got:
		if lease.Fence() <= holder.Fence() {
			t.Errorf("fence %d after %d", lease.Fence(), holder.Fence())
		}
		lease.Release(ctx)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter never got the lock")
	}
}

// A create whose reply is lost with the connection, and a caller who gives
// up while the client reconnects: the node the server did create is found
// by its protected name and deleted, so it does not block the queue for
// the rest of the session.
func TestIntegrationLostCreateLeavesNoOrphan(t *testing.T) {
	proxy := testenv.StartProxy(t, sharedZK(t).Addr())
	path := uniquePath(t)
	adm := admin(t, []string{sharedZK(t).Addr()})
	s := connect(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(10*time.Second))
	id := s.ID()
	makePath(t, adm, path, zk.WorldACL(zk.PermAll)) // so that the create is the first request
	proxy.SetLatency(300 * time.Millisecond)
	lctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := s.NewMutex(path).Lock(lctx)
		errc <- err
	}()
	waitChildren(t, adm, path, 1) // created; its reply is on the way
	proxy.SetRefuse(true)
	proxy.Reset()
	if err := <-errc; !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("Lock = %v; want ErrNotObtained", err)
	}
	proxy.SetLatency(0)
	proxy.SetRefuse(false)
	waitChildren(t, adm, path, 0)
	if s.ID() != id {
		t.Errorf("session %x became %x; the test wants the same session back", id, s.ID())
	}
	lease, err := connect(t, []string{sharedZK(t).Addr()}).NewMutex(path).TryLock(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock after the clean-up: %v", err)
	}
	lease.Release(context.Background())
}
