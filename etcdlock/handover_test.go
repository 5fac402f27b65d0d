package etcdlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// waitKeys waits until there are n keys under prefix.
func waitKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got := len(keys(t, cli, prefix)); got == n {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d keys under %s; want %d", got, prefix, n)
		}
	}
}

// createRevision returns the create revision of key.
func createRevision(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Get(ctxFor(t, 10*time.Second), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return resp.Kvs[0].CreateRevision
}

// A Mutex and etcd's own concurrency.Mutex on one prefix exclude each
// other, queue together in arrival order, and the fences of both are their
// keys' create revisions.
func TestIntegrationConcurrencyMutexExcludes(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	name := "compat/" + t.Name()
	m := connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(5*time.Second))
	session, err := concurrency.NewSession(dial(t, e.Addr()), concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	cm := concurrency.NewMutex(session, name)
	ctx := ctxFor(t, time.Minute)

	// dlock holds: concurrency's TryLock fails, its Lock waits.
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("concurrency TryLock while a dlock Mutex holds = %v; want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() { got <- cm.Lock(ctx) }()
	waitKeys(t, cli, name+"/", 2)
	select {
	case err := <-got:
		t.Fatalf("concurrency Lock returned %v while a dlock Mutex holds", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("concurrency Lock after the release: %v", err)
	}
	cmRev := createRevision(t, cli, cm.Key())
	if cmRev <= int64(l.Fence()) {
		t.Errorf("concurrency key created at %d, not after the dlock fence %d", cmRev, l.Fence())
	}

	// concurrency holds: dlock's TryLock fails, its Lock waits.
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("dlock TryLock while a concurrency.Mutex holds = %v; want ErrNotObtained", err)
	}
	type result struct {
		l   dlock.Lease
		err error
	}
	next := make(chan result, 1)
	go func() { l, err := m.Lock(ctx); next <- result{l, err} }()
	waitKeys(t, cli, name+"/", 2)
	select {
	case r := <-next:
		t.Fatalf("dlock Lock returned (%v) while a concurrency.Mutex holds", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-next
	if r.err != nil {
		t.Fatalf("dlock Lock after concurrency Unlock: %v", r.err)
	}
	if int64(r.l.Fence()) <= cmRev {
		t.Errorf("dlock fence %d not above the concurrency key's revision %d", r.l.Fence(), cmRev)
	}
	info, err := connect(t, []string{e.Addr()}).Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != dlock.KindMutex || len(info.Holders) != 1 || info.Holders[0].Owner != r.l.Token() || info.Fence != r.l.Fence() {
		t.Errorf("Inspect = %+v; want the dlock holder", info)
	}
	r.l.Release(ctx)
}

// A hand-over wakes only the next waiter: n waiters queued behind a
// holder, each releasing as soon as it holds, cost the cluster one watch
// notification per hand-over. The test counts the events the server sends
// to watchers, on a server of its own.
func TestIntegrationHandOverNotifications(t *testing.T) {
	e := testenv.StartEtcd(t)
	cli := dial(t, e.Addr())
	const n = 8
	name := "handover"
	ctx := ctxFor(t, time.Minute)
	mutexes := make([]*etcdlock.Mutex, n+1)
	for i := range mutexes {
		mutexes[i] = connect(t, []string{e.Addr()}).NewMutex(name, etcdlock.WithTTL(time.Minute))
	}
	holder, err := mutexes[0].Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fences := make(chan uint64, n)
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() {
			l, err := mutexes[i].Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			fences <- l.Fence()
			errs <- l.Release(ctx)
		}()
		waitKeys(t, cli, name+"/", i+1) // queued in order
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) { // every waiter watches
		w, err := e.Metric("etcd_debugging_mvcc_watcher_total")
		if err != nil {
			t.Fatal(err)
		}
		if w == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v watchers on the server; want one per waiter, %d", w, n)
		}
	}
	events0, err := e.Metric("etcd_debugging_mvcc_events_total")
	if err != nil {
		t.Fatal(err)
	}
	requests0, err := e.Metric("grpc_server_handled_total", `grpc_type="unary"`)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	last := holder.Fence()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		f := <-fences
		if f <= last {
			t.Errorf("fence %d after %d: waiters not served in order", f, last)
		}
		last = f
	}
	elapsed := time.Since(start)
	events1, _ := e.Metric("etcd_debugging_mvcc_events_total")
	requests1, _ := e.Metric("grpc_server_handled_total", `grpc_type="unary"`)
	perHandOver := (events1 - events0) / n
	t.Logf("%d hand-overs in %v: %.2f watch notifications and %.2f unary requests per hand-over",
		n, elapsed, perHandOver, (requests1-requests0)/n)
	if perHandOver != 1 {
		t.Errorf("%.0f watch notifications for %d hand-overs; want one each", events1-events0, n)
	}
	if left := keys(t, cli, name+"/"); len(left) != 0 {
		t.Errorf("keys left: %v", left)
	}
}

// Expected fail-fast inputs get errors naming what was wrong.
func TestIntegrationBadInput(t *testing.T) {
	c := connect(t, []string{sharedEtcd(t).Addr()})
	ctx := ctxFor(t, 10*time.Second)
	for _, tc := range []struct {
		l    dlock.Locker
		want string
	}{
		{c.NewMutex(""), "empty lock name"},
		{c.NewMutex("x", etcdlock.WithTTL(time.Millisecond)), "WithTTL"},
		{c.NewMutex("x", etcdlock.WithMaxHold(-time.Second)), "WithMaxHold"},
		{c.NewMutex("x", etcdlock.WithRetry(nil)), "WithRetry"},
		{c.NewSemaphore("x", 0), "n must be at least 1"},
	} {
		for _, try := range []bool{false, true} {
			lock := tc.l.Lock
			if try {
				lock = tc.l.TryLock
			}
			_, err := lock(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s(%q) = %v; want an error saying %q", map[bool]string{false: "Lock", true: "TryLock"}[try], tc.l.Name(), err, tc.want)
			}
		}
	}
}
