package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// lockResult is the outcome of a Lock started by lockLater.
type lockResult struct {
	lease dlock.Lease
	err   error
}

// lockLater starts l.Lock(ctx) on a goroutine of its own. It reports on the
// returned channel rather than to t, so that a Lock still waiting when the
// test ends (and its Client closes) does not log to a finished test.
func lockLater(ctx context.Context, l dlock.Locker) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		lease, err := l.Lock(ctx)
		ch <- lockResult{lease, err}
	}()
	return ch
}

// obtained waits up to d for the Lock started by lockLater and returns its
// lease.
func obtained(t *testing.T, ch <-chan lockResult, d time.Duration, what string) dlock.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: Lock: %v", what, r.err)
		}
		return r.lease
	case <-time.After(d):
		t.Fatalf("%s: Lock has not returned after %v", what, d)
		return nil
	}
}

// stillWaiting fails t if the Lock started by lockLater has returned.
func stillWaiting(t *testing.T, ch <-chan lockResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: Lock returned (%v, %v); want it still waiting", what, r.lease, r.err)
	default:
	}
}

func inspect(t testing.TB, s *zklock.Client, p string) dlock.Info {
	t.Helper()
	info, err := s.Inspect(ctxFor(t, 10*time.Second), p)
	if err != nil {
		t.Fatalf("Inspect(%s): %v", p, err)
	}
	if info.Name != p {
		t.Errorf("Inspect(%s).Name = %q", p, info.Name)
	}
	return info
}

// checkHolder fails t unless h describes lease, held in session s, in mode.
func checkHolder(t *testing.T, h dlock.Holder, lease dlock.Lease, s *zklock.Client, mode string) {
	t.Helper()
	want := dlock.Holder{Owner: lease.Token(), Mode: mode, Holds: 1, Fence: lease.Fence(),
		Where: fmt.Sprintf("node %s of session 0x%x", path.Base(lease.(*zklock.Lease).Path()), s.ID())}
	if h != want {
		t.Errorf("holder %+v; want %+v", h, want)
	}
}

func TestIntegrationInspectFree(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{sharedZK(t).Addr()})

	never := uniquePath(t)
	if info := inspect(t, s, never); info.Kind != "free" || info.Holders != nil || info.Waiters != 0 || info.Detail != "" {
		t.Errorf("a path never used: %+v; want Kind free and nothing else", info)
	}

	// A released lock leaves its path (a container) empty until the
	// ensemble reaps it.
	released := uniquePath(t)
	lease, err := s.NewMutex(released).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, s, released); info.Kind != "mutex" {
		t.Fatalf("a held lock: Kind %q; want mutex", info.Kind)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info := inspect(t, s, released); info.Kind != "free" || info.Holders != nil || info.Waiters != 0 {
		t.Errorf("a released lock: %+v; want Kind free and nothing else", info)
	}
}

func TestIntegrationInspectMutex(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()}) // the operator's session
	hs := connect(t, []string{sharedZK(t).Addr()})
	held, err := hs.NewMutex(p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := connect(t, []string{sharedZK(t).Addr()})
	w1 := lockLater(ctx, ws.NewMutex(p))
	waitChildren(t, adm, p, 2)
	w2 := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewMutex(p))
	waitChildren(t, adm, p, 3)

	info := inspect(t, op, p)
	if info.Kind != "mutex" || len(info.Holders) != 1 || info.Waiters != 2 || info.PermitLimit != 0 {
		t.Fatalf("Inspect = %+v; want a mutex with 1 holder and 2 waiters", info)
	}
	checkHolder(t, info.Holders[0], held, hs, "exclusive")
	if kids := children(t, adm, p); len(kids) != 3 {
		t.Errorf("after Inspect the path has children %v; want the 3 it had", kids)
	}
	stillWaiting(t, w1, "waiter 1")

	// Once the holder releases, the first waiter holds and one waits.
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := obtained(t, w1, 10*time.Second, "waiter 1")
	info = inspect(t, op, p)
	if len(info.Holders) != 1 || info.Waiters != 1 {
		t.Fatalf("after the release: %+v; want 1 holder and 1 waiter", info)
	}
	checkHolder(t, info.Holders[0], next, ws, "exclusive")
	if info.Holders[0].Fence <= held.Fence() {
		t.Errorf("the next holder's fence %d is not above the first's %d", info.Holders[0].Fence, held.Fence())
	}
	next.Release(ctx)
	obtained(t, w2, 10*time.Second, "waiter 2").Release(ctx)
}

// go-zookeeper's zk.Lock names its nodes as a Mutex does: Inspect reports
// it as a mutex, and ForceUnlock releases it to the Mutex queued behind it.
func TestIntegrationInspectZkLock(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	peerConn := admin(t, []string{sharedZK(t).Addr()})
	peer := zk.NewLock(peerConn, p, zk.WorldACL(zk.PermAll))
	if err := peer.LockWithData([]byte("peer")); err != nil {
		t.Fatal(err)
	}
	op := connect(t, []string{sharedZK(t).Addr()})
	waiter := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewMutex(p))
	waitChildren(t, admin(t, []string{sharedZK(t).Addr()}), p, 2)

	info := inspect(t, op, p)
	if info.Kind != "mutex" || len(info.Holders) != 1 || info.Waiters != 1 {
		t.Fatalf("Inspect = %+v; want a mutex held by zk.Lock, with 1 waiter", info)
	}
	if h := info.Holders[0]; !strings.Contains(h.Where, fmt.Sprintf("session 0x%x", peerConn.SessionID())) || h.Owner != "peer" || h.Mode != "exclusive" ||
		!strings.Contains(h.Where, "-lock-") {
		t.Errorf("holder %+v; want zk.Lock's node, of session %d, with data peer", h, peerConn.SessionID())
	}
	n, err := op.ForceUnlock(ctx, p)
	if !n || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", n, err)
	}
	lease := obtained(t, waiter, 10*time.Second, "the Mutex behind zk.Lock")
	if lease.Fence() <= info.Holders[0].Fence {
		t.Errorf("the Mutex's fence %d is not above zk.Lock's %d", lease.Fence(), info.Holders[0].Fence)
	}
	lease.Release(ctx)
}

// Two readers hold; a writer waits, and so does the reader queued behind
// it.
func TestIntegrationInspectRWMutex(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()})
	s1, s2 := connect(t, []string{sharedZK(t).Addr()}), connect(t, []string{sharedZK(t).Addr()})
	r1, err := s1.NewRWMutex(p).Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s2.NewRWMutex(p).Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(p).Writer())
	waitChildren(t, adm, p, 3)
	r3 := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(p).Reader())
	waitChildren(t, adm, p, 4)

	info := inspect(t, op, p)
	if info.Kind != "rwmutex" || len(info.Holders) != 2 || info.Waiters != 2 {
		t.Fatalf("Inspect = %+v; want an rwmutex with 2 holders and 2 waiters", info)
	}
	checkHolder(t, info.Holders[0], r1, s1, "read")
	checkHolder(t, info.Holders[1], r2, s2, "read")
	stillWaiting(t, w, "writer")
	stillWaiting(t, r3, "reader behind the writer")

	r1.Release(ctx)
	r2.Release(ctx)
	wl := obtained(t, w, 10*time.Second, "writer")
	if info := inspect(t, op, p); len(info.Holders) != 1 || info.Holders[0].Mode != "write" || info.Waiters != 1 {
		t.Errorf("with the writer in: %+v; want 1 write holder and 1 waiter", info)
	}
	wl.Release(ctx)
	obtained(t, r3, 10*time.Second, "reader behind the writer").Release(ctx)
}

// A downgraded writer counts as a reader that lets in the readers queued
// behind it, and not the writer behind them; ForceUnlock deletes all the
// holders, which lets that writer in and ends the old leases with
// ErrTakenOver.
func TestIntegrationInspectRWMutexDowngrade(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()})
	s0 := connect(t, []string{sharedZK(t).Addr()})
	rw := s0.NewRWMutex(p)
	write, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1 := connect(t, []string{sharedZK(t).Addr()})
	r1 := lockLater(ctx, s1.NewRWMutex(p).Reader())
	waitChildren(t, adm, p, 2)
	w2 := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(p).Writer())
	waitChildren(t, adm, p, 3)

	info := inspect(t, op, p)
	if len(info.Holders) != 1 || info.Waiters != 2 {
		t.Fatalf("before Downgrade: %+v; want the writer holding and 2 waiters", info)
	}
	checkHolder(t, info.Holders[0], write, s0, "write")

	read, err := rw.Downgrade(ctx, write)
	if err != nil {
		t.Fatal(err)
	}
	reader := obtained(t, r1, 10*time.Second, "reader behind the downgraded writer")
	info = inspect(t, op, p)
	if len(info.Holders) != 2 || info.Waiters != 1 {
		t.Fatalf("after Downgrade: %+v; want 2 holders and 1 waiter", info)
	}
	checkHolder(t, info.Holders[0], read, s0, "read") // the writer's node, with its fence
	checkHolder(t, info.Holders[1], reader, s1, "read")
	if read.Fence() != write.Fence() {
		t.Errorf("downgraded fence %d; want the writer's %d", read.Fence(), write.Fence())
	}

	n, err := op.ForceUnlock(ctx, p)
	if !n || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", n, err)
	}
	wl := obtained(t, w2, 10*time.Second, "writer behind the readers")
	for _, l := range []dlock.Lease{read, reader} {
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the lease of %s did not end after ForceUnlock", l.(*zklock.Lease).Path())
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTakenOver) {
			t.Errorf("Err = %v; want ErrLost and ErrTakenOver", err)
		}
	}
	if wl.Fence() <= reader.Fence() {
		t.Errorf("the writer's fence %d is not above the readers' (%d)", wl.Fence(), reader.Fence())
	}
	wl.Release(ctx)
}

func TestIntegrationInspectSemaphore(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()})
	const n = 3
	var sessions []*zklock.Client
	var leases []dlock.Lease
	take := func() {
		s := connect(t, []string{sharedZK(t).Addr()})
		l, err := s.NewSemaphore(p, n).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sessions, leases = append(sessions, s), append(leases, l)
	}
	take()
	take()

	info := inspect(t, op, p)
	if info.Kind != "semaphore" || info.PermitLimit != n || len(info.Holders) != 2 || info.Waiters != 0 {
		t.Fatalf("Inspect = %+v; want a semaphore of 3 with 2 in use and no waiter", info)
	}
	for i, h := range info.Holders {
		checkHolder(t, h, leases[i], sessions[i], "permit")
	}

	// A third lease fills it; a fourth waits.
	take()
	waiter := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewSemaphore(p, n))
	waitChildren(t, adm, p, 4)
	info = inspect(t, op, p)
	if len(info.Holders) != n || info.Waiters != 1 {
		t.Fatalf("full: %+v; want 3 in use and 1 waiter", info)
	}
	for i, h := range info.Holders {
		checkHolder(t, h, leases[i], sessions[i], "permit")
	}
	leases[0].Release(ctx)
	obtained(t, waiter, 10*time.Second, "the fourth").Release(ctx)
	for _, l := range leases[1:] {
		l.Release(ctx)
	}
}

// ForceUnlock deletes the holder's node: the first waiter gets the lock
// with a larger fence, the second still waits, and the old holder learns
// of it at its next confirmation.
func TestIntegrationForceUnlockMutex(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()})
	hs := connect(t, []string{sharedZK(t).Addr()})
	held, err := hs.NewMutex(p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := connect(t, []string{sharedZK(t).Addr()})
	w1 := lockLater(ctx, ws.NewMutex(p))
	waitChildren(t, adm, p, 2)
	w2 := lockLater(ctx, connect(t, []string{sharedZK(t).Addr()}).NewMutex(p))
	waitChildren(t, adm, p, 3)

	n, err := op.ForceUnlock(ctx, p)
	forced := time.Now()
	if !n || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", n, err)
	}
	next := obtained(t, w1, 10*time.Second, "the first waiter")
	t.Logf("the first waiter held %v after ForceUnlock", time.Since(forced))
	if next.Fence() <= held.Fence() {
		t.Errorf("the next fence %d is not above the old holder's %d", next.Fence(), held.Fence())
	}
	stillWaiting(t, w2, "the second waiter")
	info := inspect(t, op, p)
	if len(info.Holders) != 1 || info.Waiters != 1 {
		t.Fatalf("after ForceUnlock: %+v; want the first waiter holding and 1 waiter", info)
	}
	checkHolder(t, info.Holders[0], next, ws, "exclusive")

	// The holder is confirmed every third of its lease time, the smaller of
	// the TTL and a third of the session timeout.
	period := min(zklock.DefaultTTL, testSessionTimeout/3) / 3
	select {
	case <-held.Done():
		t.Logf("the old holder's lease ended %v after ForceUnlock (confirmation period %v)", time.Since(forced), period)
	case <-time.After(time.Until(forced.Add(period + period/2))):
		t.Fatalf("the old holder's lease has not ended %v after ForceUnlock; it is confirmed every %v", time.Since(forced), period)
	}
	if err := held.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrTakenOver) {
		t.Errorf("the old holder's Err = %v; want ErrLost and ErrTakenOver", err)
	}
	if err := held.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the old holder's Release = %v; want ErrNotHeld", err)
	}
	next.Release(ctx)
	obtained(t, w2, 10*time.Second, "the second waiter").Release(ctx)
}

// A holder released between ForceUnlock's listing and its delete is no
// error and not counted, and the node that holds by the time of the
// delete, which the listing did not see holding, is left alone. The
// operator's connection runs through a slow proxy, so the release falls
// between the two requests.
func TestIntegrationForceUnlockVanishedHolder(t *testing.T) {
	p := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	proxy := testenv.StartProxy(t, sharedZK(t).Addr())
	op := connect(t, []string{proxy.Addr()})
	held, err := connect(t, []string{sharedZK(t).Addr()}).NewMutex(p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := connect(t, []string{sharedZK(t).Addr()})
	w1 := lockLater(ctx, ws.NewMutex(p))
	waitChildren(t, adm, p, 2)

	const latency = 300 * time.Millisecond
	proxy.SetLatency(latency)
	type result struct {
		n   bool
		err error
	}
	forced := make(chan result, 1)
	go func() {
		n, err := op.ForceUnlock(ctx, p)
		forced <- result{n, err}
	}()
	// The listing reaches the ensemble after one latency and the delete
	// after three: release halfway between.
	time.Sleep(latency * 3 / 2)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := obtained(t, w1, 10*time.Second, "the waiter")
	if r := <-forced; r.n || r.err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want false, nil (the holder it listed had gone)", r.n, r.err)
	}
	proxy.SetLatency(0)
	info := inspect(t, op, p)
	if len(info.Holders) != 1 || info.Waiters != 0 {
		t.Fatalf("after ForceUnlock: %+v; want the waiter still holding", info)
	}
	checkHolder(t, info.Holders[0], next, ws, "exclusive")
	if next.Err() != nil {
		t.Errorf("the waiter's lease ended: %v", next.Err())
	}
	next.Release(ctx)
}

func TestIntegrationForceUnlockFree(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{sharedZK(t).Addr()})
	never := uniquePath(t)
	if n, err := s.ForceUnlock(ctx, never); n || err != nil {
		t.Errorf("ForceUnlock of a path never used = %v, %v; want false, nil", n, err)
	}
	released := uniquePath(t)
	lease, err := s.NewSemaphore(released, 2).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	if n, err := s.ForceUnlock(ctx, released); n || err != nil {
		t.Errorf("ForceUnlock of a released lock = %v, %v; want false, nil", n, err)
	}
}

// Semaphore nodes that disagree on its size are "unknown" (children that
// no lock made are left out: see dlocktest's NestedNames): ForceUnlock leaves them alone and says why. (A
// node of another kind behind the holder is a waiter: see
// TestIntegrationPermitWaitsBehindAnotherKind.)
func TestIntegrationInspectUnknown(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	op := connect(t, []string{sharedZK(t).Addr()})
	acl := zk.WorldACL(zk.PermAll)
	for _, tt := range []struct {
		name  string
		nodes []string // created under the path, persistent
		want  string   // in ForceUnlock's error
	}{
		{"permits", []string{"_c_00-permit2-0000000001", "_c_00-permit3-0000000002"}, "disagree on the number of leases"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := uniquePath(t)
			// /dlock-test may be a container, reaped once empty: create
			// it again if it goes in between.
			for attempt := 1; ; attempt++ {
				_, err := adm.Create("/dlock-test", nil, 0, acl)
				if err == nil || errors.Is(err, zk.ErrNodeExists) {
					_, err = adm.Create(p, nil, 0, acl)
				}
				if err == nil {
					break
				}
				if !errors.Is(err, zk.ErrNoNode) || attempt == 3 {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { adm.Delete(p, -1) })
			for _, node := range tt.nodes {
				if _, err := adm.Create(p+"/"+node, []byte("x"), 0, acl); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { adm.Delete(p+"/"+node, -1) })
			}
			info := inspect(t, op, p)
			if info.Kind != "unknown" || info.Holders != nil || info.Waiters != 0 || !strings.Contains(info.Detail, strings.Join(tt.nodes, ", ")) {
				t.Errorf("Inspect = %+v; want Kind unknown with a Detail listing %v", info, tt.nodes)
			}
			n, err := op.ForceUnlock(ctx, p)
			if n || err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("ForceUnlock = %v, %v; want 0 and an error naming %s and saying %q", n, err, p, tt.want)
			}
			if kids := children(t, adm, p); len(kids) != len(tt.nodes) {
				t.Errorf("after ForceUnlock the path has children %v; want %v", kids, tt.nodes)
			}
		})
	}
}

// A bad path gets the error the locks give it, before any network call;
// a closed Client gets ErrClosed.
func TestIntegrationInspectBadPath(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{sharedZK(t).Addr()})
	for _, p := range []string{"", "locks/x", "/", "/locks/x/", "/locks//x", "/locks/../x", "/zookeeper/x", "/locks/\x01"} {
		_, want := s.NewMutex(p).TryLock(ctx)
		if want == nil {
			t.Fatalf("TryLock on %q succeeded; the test needs a bad path", p)
		}
		if info, err := s.Inspect(ctx, p); err == nil || err.Error() != want.Error() {
			t.Errorf("Inspect(%q) = %+v, %v; want the error %q", p, info, err, want)
		}
		if n, err := s.ForceUnlock(ctx, p); n || err == nil || err.Error() != want.Error() {
			t.Errorf("ForceUnlock(%q) = %v, %v; want false and the error %q", p, n, err, want)
		}
	}

	closed := connect(t, []string{sharedZK(t).Addr()})
	closed.Close()
	if _, err := closed.Inspect(ctx, uniquePath(t)); !errors.Is(err, zklock.ErrClosed) {
		t.Errorf("Inspect on a closed Session = %v; want ErrClosed", err)
	}
	if _, err := closed.ForceUnlock(ctx, uniquePath(t)); !errors.Is(err, zklock.ErrClosed) {
		t.Errorf("ForceUnlock on a closed Session = %v; want ErrClosed", err)
	}
}
