package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// checkHandOver locks m (on another client than old's) and checks that it
// is granted only once old has ended (by its Until at the latest), with a
// larger fence.
func checkHandOver(t *testing.T, ctx context.Context, old dlock.Lease, m *etcdlock.Mutex) dlock.Lease {
	t.Helper()
	next, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock by the next holder: %v", err)
	}
	granted := time.Now()
	select {
	case <-old.Done():
	default:
		if granted.Before(old.Until()) {
			t.Errorf("next holder granted %v before the old lease's Until, which had not ended (Err %v)", old.Until().Sub(granted), old.Err())
		}
	}
	if next.Fence() <= old.Fence() {
		t.Errorf("next fence %d; want above %d", next.Fence(), old.Fence())
	}
	return next
}

// cycle locks and releases m once, and returns the fence it had.
func cycle(t *testing.T, ctx context.Context, m *etcdlock.Mutex) uint64 {
	t.Helper()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return l.Fence()
}

// A holder's lease rides out the kill of the cluster's leader: the new
// leader keeps the etcd lease, renewals go on, and fences keep increasing.
func TestIntegrationLeaderKill(t *testing.T) {
	t.Parallel() // on servers of its own, mostly waiting
	c := testenv.StartEtcdCluster(t, 3)
	ctx := ctxFor(t, 2*time.Minute)
	const ttl = 4 * time.Second
	holder := connect(t, c.Addrs()).NewMutex("leader-kill", etcdlock.WithTTL(ttl))
	other := connect(t, c.Addrs()).NewMutex("leader-kill", etcdlock.WithTTL(ttl))
	before := cycle(t, ctx, other)
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	until := l.Until()
	for deadline := time.Now().Add(2 * ttl); !l.Until().After(until) && l.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost to a leader kill: %v", err)
	}
	if !l.Until().After(until) {
		t.Fatalf("lease not renewed after the election (Until %v)", until)
	}
	if _, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock while held after the election = %v; want ErrNotObtained", err)
	}
	if l.Fence() <= before {
		t.Errorf("fence %d after %d", l.Fence(), before)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if f := cycle(t, ctx, other); f <= l.Fence() {
		t.Errorf("fence after the election %d; want above %d", f, l.Fence())
	}
}

// A paused member (the leader, the harder case: a new one is elected while
// clients may still be talking to it) breaks no exclusion: a waiter is
// granted the lock only once the holder's lease has ended, and the lock is
// usable again after the member resumes.
func TestIntegrationMemberPaused(t *testing.T) {
	t.Parallel() // on servers of its own, mostly waiting
	c := testenv.StartEtcdCluster(t, 3)
	ctx := ctxFor(t, 2*time.Minute)
	const ttl = 2 * time.Second
	holder := connect(t, c.Addrs()).NewMutex("paused", etcdlock.WithTTL(ttl))
	waiter := connect(t, c.Addrs()).NewMutex("paused", etcdlock.WithTTL(ttl))
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := time.AfterFunc(3*ttl, func() { leader.Resume() })
	defer func() {
		resumed.Stop()
		leader.Resume()
	}()
	wctx, cancel := context.WithTimeout(ctx, 8*ttl)
	defer cancel()
	type result struct {
		l   dlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		next, err := waiter.Lock(wctx)
		got <- result{next, err}
	}()
	// The holder keeps renewing through the members that answer, or loses
	// its lease by its Until; either way it is the only holder until then.
	time.Sleep(2 * ttl)
	t.Logf("after %v with the leader paused: holder Err %v", 2*ttl, l.Err())
	if l.Err() == nil {
		err := l.Release(ctx)
		t.Logf("holder released %v after the pause: %v", time.Since(paused), err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	t.Logf("waiter granted %v after the pause", time.Since(paused))
	if l.Err() == nil {
		t.Fatal("waiter granted while the holder's lease had not ended")
	}
	if r.l.Fence() <= l.Fence() {
		t.Errorf("waiter's fence %d; want above %d", r.l.Fence(), l.Fence())
	}
	r.l.Release(ctx)
	resumed.Stop()
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cycle(t, ctx, holder)
	t.Logf("a lock cycle after the resume took %v", time.Since(start))
}

// A holder cut off from the cluster (a blackholed proxy between them) past
// its lease learns it by its Until; the cluster expires its etcd lease and
// a waiter takes the lock, with a larger fence, only after that Until.
func TestIntegrationHolderCutOff(t *testing.T) {
	e := testenv.StartEtcd(t)
	proxy := testenv.StartProxy(t, e.Addr())
	ctx := ctxFor(t, time.Minute)
	const ttl = 2 * time.Second
	holder := connect(t, []string{proxy.Addr()}).NewMutex("cut-off", etcdlock.WithTTL(ttl))
	waiter := connect(t, []string{e.Addr()}).NewMutex("cut-off", etcdlock.WithTTL(ttl))
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(true)
	cut := time.Now()
	ended := make(chan time.Duration, 1)
	go func() { <-l.Done(); ended <- time.Since(cut) }()
	next := checkHandOver(t, ctx, l, waiter)
	t.Logf("holder's lease ended %v after the cut (its Until %v after); next holder granted %v after",
		<-ended, l.Until().Sub(cut), time.Since(cut))
	select {
	case <-l.Done():
	default:
		t.Fatal("the cut-off holder's lease has not ended")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Errorf("cut-off holder's Err = %v; want ErrLost and ErrExpired", err)
	}
	next.Release(ctx)
	proxy.Blackhole(false)
}

// A lease survives a restart of every member within its lease time: the
// cluster keeps its etcd lease, renewals resume, and later fences are
// larger.
func TestIntegrationRestartEveryMember(t *testing.T) {
	t.Parallel() // on servers of its own, mostly waiting
	c := testenv.StartEtcdCluster(t, 3)
	ctx := ctxFor(t, 2*time.Minute)
	const ttl = 20 * time.Second
	holder := connect(t, c.Addrs()).NewMutex("restart", etcdlock.WithTTL(ttl))
	other := connect(t, c.Addrs()).NewMutex("restart", etcdlock.WithTTL(ttl))
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("every member restarted in %v", time.Since(start))
	until := l.Until()
	for deadline := time.Now().Add(ttl); !l.Until().After(until) && l.Err() == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost to a restart of every member: %v", err)
	}
	if !l.Until().After(until) {
		t.Fatal("lease not renewed after the restart")
	}
	if _, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock while held after the restart = %v; want ErrNotObtained", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if f := cycle(t, ctx, other); f <= l.Fence() {
		t.Errorf("fence after the restart %d; want above %d", f, l.Fence())
	}
}
