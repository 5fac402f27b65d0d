package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A waiter whose own etcd lease is gone (the cluster expired it while it
// could not hear from the waiter, as across a pause of the leader longer
// than the TTL) queues again and takes the lock once it is free: it failed
// with ErrLeaseNotFound before issue 32.
func TestIntegrationWaiterLosesItsLeaseAndQueuesAgain(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	const name, ttl = "waiter-loses-lease", 2 * time.Second
	holder := connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(ttl))
	waiting := make(chan struct{})
	var once sync.Once
	obs := dlock.ObserverFunc(func(ev dlock.Event) {
		if ev.Kind == dlock.EventWaiting {
			once.Do(func() { close(waiting) })
		}
	})
	waiter := connect(t, []string{e.Addr()}, etcdlock.WithObserver(obs)).NewMutex(name, etcdlock.WithTTL(ttl))
	held, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var next dlock.Lease
	go func() {
		var err error
		next, err = waiter.Lock(ctx)
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("Lock of a held lock returned %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not wait")
	}
	cli := dial(t, e.Addr())
	resp, err := cli.Get(ctx, name+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var revoked clientv3.LeaseID
	for _, kv := range resp.Kvs {
		if string(kv.Key) != held.(*etcdlock.Lease).EtcdKey() {
			revoked = clientv3.LeaseID(kv.Lease)
		}
	}
	if revoked == 0 {
		t.Fatalf("no waiter's key under %s/: %v", name, resp.Kvs)
	}
	if _, err := cli.Revoke(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	// The waiter learns it at its next renewal, a third of the TTL later.
	time.Sleep(ttl)
	select {
	case err := <-done:
		t.Fatalf("the waiter whose etcd lease was revoked gave up: %v", err)
	default:
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiter whose etcd lease was revoked: %v", err)
		}
		if next.Fence() <= held.Fence() {
			t.Errorf("fence %d after %d", next.Fence(), held.Fence())
		}
		next.Release(ctx)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted the released lock")
	}
}

// lateTimer is a context whose deadline passes, by the clock, before it
// is done: a loaded machine runs the timer that cancels a context late.
type lateTimer struct {
	context.Context
	deadline time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.deadline, true }

// pastDeadlineTxn fails, once its context's deadline has passed by the
// clock, as an etcd 3.4 server that saw it pass first answers.
type pastDeadlineTxn struct {
	clientv3.Txn
	ctx context.Context
}

func (t pastDeadlineTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	return pastDeadlineTxn{t.Txn.If(cs...), t.ctx}
}
func (t pastDeadlineTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return pastDeadlineTxn{t.Txn.Then(ops...), t.ctx}
}
func (t pastDeadlineTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return pastDeadlineTxn{t.Txn.Else(ops...), t.ctx}
}
func (t pastDeadlineTxn) Commit() (*clientv3.TxnResponse, error) {
	d, _ := t.ctx.Deadline()
	time.Sleep(time.Until(d) + 10*time.Millisecond)
	return nil, status.Error(codes.Unknown, context.DeadlineExceeded.Error())
}

// pastDeadlineKV gives every transaction pastDeadlineTxn's fault.
type pastDeadlineKV struct{ clientv3.KV }

func (k pastDeadlineKV) Txn(ctx context.Context) clientv3.Txn {
	return pastDeadlineTxn{k.KV.Txn(ctx), ctx}
}

// A Lock whose ctx's deadline passes while it queues returns an error
// matching dlock.ErrNotObtained and context.DeadlineExceeded, even when
// the timer that cancels ctx has not run yet and the server answered
// "Unknown: context deadline exceeded": it returned that answer, "queueing
// for ...: rpc error: code = Unknown desc = context deadline exceeded",
// before issue 32.
func TestIntegrationQueueingPastCallersDeadline(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	cli.KV = pastDeadlineKV{cli.KV}
	c := etcdlock.New(cli)
	t.Cleanup(func() { c.Close() })
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := lateTimer{base, time.Now().Add(time.Second)}
	done := make(chan error, 1)
	go func() {
		l, err := c.NewMutex("past-callers-deadline").Lock(ctx)
		if l != nil {
			l.Release(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lock past its deadline = %v; want ErrNotObtained and DeadlineExceeded", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Lock still running 19s after its deadline")
	}
}

// A Refresh with a context that never ends, on a cluster that does not
// answer, returns by the lease's Until with an error matching
// dlock.ErrUnavailable (or the lease's own, once it has ended): it
// blocked for as long as the cluster stayed silent before issue 32.
func TestIntegrationRefreshOnSilentCluster(t *testing.T) {
	e := sharedEtcd(t)
	p := testenv.StartProxy(t, e.Addr())
	ctx := ctxFor(t, time.Minute)
	l, err := connect(t, []string{p.Addr()}).NewMutex("refresh-silent", etcdlock.WithTTL(2*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	defer p.Blackhole(false)
	until := l.Until()
	done := make(chan error, 1)
	go func() { done <- l.Refresh(context.Background()) }()
	select {
	case err := <-done:
		late := time.Since(until)
		t.Logf("measured: Refresh returned %v after Until: %v", late.Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Refresh on a silent cluster = %v; want ErrUnavailable or ErrLost", err)
		}
		if late > 500*time.Millisecond {
			t.Errorf("Refresh returned %v after the lease's Until", late)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Refresh on a silent cluster still running %v after the lease's Until", time.Since(until))
	}
}

// A Lock waiting behind a holder when the cluster goes away (refusing
// connections, or silent) returns when its ctx ends, with an error
// matching dlock.ErrUnavailable as well as ErrNotObtained and ctx's error:
// before, with the wait in a watch that told nothing and the renewal of
// the waiter's etcd lease not due yet, it returned 5s late (the revoke of
// its key waited for the cluster) and as a plain ErrNotObtained, which
// "dlock run --wait" reported as a lock held by another owner.
func TestIntegrationWaitingWhenClusterGoes(t *testing.T) {
	e := sharedEtcd(t)
	for _, refuse := range []bool{true, false} {
		t.Run(map[bool]string{true: "refused", false: "silent"}[refuse], func(t *testing.T) {
			t.Parallel() // mostly waiting, through a proxy of its own
			name := "waiting-when-cluster-goes-" + map[bool]string{true: "refused", false: "silent"}[refuse]
			const ttl, wait = 30 * time.Second, 3 * time.Second
			held, err := connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(ttl)).Lock(ctxFor(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctxFor(t, 10*time.Second))
			p := testenv.StartProxy(t, e.Addr())
			waiting := make(chan struct{})
			var once sync.Once
			obs := dlock.ObserverFunc(func(ev dlock.Event) {
				if ev.Kind == dlock.EventWaiting {
					once.Do(func() { close(waiting) })
				}
			})
			// Its Close cannot finish the clean-ups: the cluster is gone.
			wc := etcdlock.New(dial(t, p.Addr()), etcdlock.WithObserver(obs))
			defer wc.Close()
			waiter := wc.NewMutex(name, etcdlock.WithTTL(ttl))
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				l, err := waiter.Lock(ctx)
				if l != nil {
					l.Release(context.Background())
				}
				done <- err
			}()
			select {
			case <-waiting:
			case err := <-done:
				t.Fatalf("Lock of a held lock returned %v", err)
			}
			cut(p, refuse)
			deadline, _ := ctx.Deadline()
			select {
			case err := <-done:
				late := time.Since(deadline)
				t.Logf("measured: Lock returned %v after its ctx ended: %v", late.Round(time.Millisecond), err)
				if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrUnavailable) {
					t.Errorf("Lock = %v; want ErrNotObtained, DeadlineExceeded and ErrUnavailable", err)
				}
				if late > time.Second+500*time.Millisecond {
					t.Errorf("Lock returned %v after its ctx ended", late)
				}
			case <-time.After(wait + 30*time.Second):
				t.Fatal("Lock still waiting 30s after its ctx ended")
			}
		})
	}
}

// TryLock, at the default TTL, on endpoints that refuse connections
// (none ever listened, or the one that did went away) returns
// dlock.ErrUnavailable as soon as the client has no connection to any of
// them, not at the end of its bound: it took the whole bound, 5.0s, before
// (with DialTimeout 2s the user expected it within 2s). A silent
// endpoint still takes the bound: only the bound tells it from a slow one.
func TestIntegrationTryLockRefusedEndpoints(t *testing.T) {
	e := sharedEtcd(t)
	p := testenv.StartProxy(t, e.Addr())
	gone := connect(t, []string{p.Addr()})
	if l, err := gone.NewMutex("refused-endpoints").TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	} else {
		l.Release(ctxFor(t, 10*time.Second))
	}
	p.SetRefuse(true)
	p.Reset()
	for _, tc := range []struct {
		what string
		c    *etcdlock.Client
	}{
		{"never listened", connect(t, []string{"127.0.0.1:1"})},
		{"went away", gone},
		{"went away, asked again", gone},
	} {
		start := time.Now()
		_, err := tc.c.NewMutex("refused-endpoints").TryLock(context.Background())
		took := time.Since(start)
		t.Logf("measured: TryLock on an endpoint that %s returned after %v: %v", tc.what, took.Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("TryLock on an endpoint that %s = %v; want ErrUnavailable, not ErrNotObtained", tc.what, err)
		}
		if took > time.Second {
			t.Errorf("TryLock on an endpoint that %s took %v; want within a second", tc.what, took)
		}
	}
	// Once it is back, before gRPC's backoff would connect again, the
	// next TryLock finds it.
	p.SetRefuse(false)
	l, err := gone.NewMutex("refused-endpoints").TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock once the endpoint is back: %v", err)
	}
	l.Release(ctxFor(t, 10*time.Second))
}

// A Lock waiting while the cluster refuses connections for a while (a
// member down for 12s) is granted as soon as its retry strategy asks
// again after the cluster is back, not when gRPC's own reconnect backoff
// (1s growing 1.6 times per failure, up to two minutes) next lets the
// client connect: that took 1.4 to 7.4s after the cluster was back
// (40s down: 7.4s), with requests failing at once in between.
func TestIntegrationLockReconnectsWhenBack(t *testing.T) {
	t.Parallel() // mostly waiting, through a proxy of its own
	e := sharedEtcd(t)
	p := testenv.StartProxy(t, e.Addr())
	m := connect(t, []string{p.Addr()}).NewMutex("reconnects-when-back", etcdlock.WithTTL(2*time.Second),
		etcdlock.WithRetry(dlock.ExponentialBackoff(10*time.Millisecond, 100*time.Millisecond)))
	l, err := m.TryLock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctxFor(t, 10*time.Second))
	p.SetRefuse(true)
	p.Reset()
	ctx := ctxFor(t, time.Minute)
	type result struct {
		l   dlock.Lease
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := m.Lock(ctx)
		done <- result{l, time.Now(), err}
	}()
	time.Sleep(12 * time.Second)
	p.SetRefuse(false)
	back := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatalf("Lock through 12s of refused connections: %v", r.err)
	}
	r.l.Release(ctx)
	took := r.at.Sub(back)
	t.Logf("measured: granted %v after the cluster was back", took.Round(time.Millisecond))
	// The retry's longest wait (100ms), an attempt (222ms at TTL 2s), a
	// connection and the grant's two requests.
	if took > time.Second {
		t.Errorf("granted %v after the cluster was back; want within a second", took)
	}
}
