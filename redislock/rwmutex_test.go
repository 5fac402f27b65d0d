package redislock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// rwKeys returns the writer, readers and intent keys of an RWMutex.
func rwKeys(name string) (writer, readers, intent string) {
	b := lockKey(name)
	return b + ":writer", b + ":readers", b + ":wintent"
}

// Many independent clients, mostly readers: readers share the lock, and a
// writer never overlaps anyone.
func TestIntegrationRWMutexSafety(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 20*time.Second)
	const clients, rounds = 16, 25
	var (
		mu                sync.Mutex
		readers, writers  int
		maxReaders, wrote int
	)
	fails := make(chan string, 1)
	fail := func(msg string) {
		select {
		case fails <- msg:
		default:
		}
	}
	var wg sync.WaitGroup
	for i := range clients {
		open := transports[i%len(transports)].open
		rw := newClient(t, d, open).NewRWMutex("rw-safety", redislock.WithTTL(5*time.Second))
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), 1))
			for range rounds {
				write := rnd.IntN(10) == 0
				side := rw.Reader()
				if write {
					side = rw.Writer()
				}
				l, err := side.Lock(ctx)
				if err != nil {
					fail("Lock: " + err.Error())
					return
				}
				mu.Lock()
				if write {
					writers++
					if writers != 1 || readers != 0 {
						fail("a writer overlapped another holder")
					}
					wrote++
				} else {
					readers++
					if writers != 0 {
						fail("a reader overlapped a writer")
					}
					maxReaders = max(maxReaders, readers)
				}
				mu.Unlock()
				time.Sleep(time.Duration(1+rnd.IntN(3)) * time.Millisecond)
				mu.Lock()
				if write {
					writers--
				} else {
					readers--
				}
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					fail("Release: " + err.Error())
					return
				}
			}
		})
	}
	wg.Wait()
	close(fails)
	for f := range fails {
		t.Fatal(f)
	}
	if maxReaders < 2 {
		t.Errorf("at most %d reader(s) held at once; want readers to overlap", maxReaders)
	}
	t.Logf("max simultaneous readers %d, writer grants %d", maxReaders, wrote)
}

// A waiting writer keeps new readers out, while the readers that hold keep
// holding, and gets the lock once they release.
func TestIntegrationRWMutexWriterPriority(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 15*time.Second)
	const name = "rw-priority"
	_, _, intent := rwKeys(name)
	r1, err := newClient(t, d, goRedis).NewRWMutex(name).Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := newClient(t, d, goRedis).NewRWMutex(name).Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lease, 1)
	go func() {
		w, err := newClient(t, d, goRedis).NewRWMutex(name).Writer().Lock(ctx)
		if err != nil {
			t.Errorf("writer Lock: %v", err)
		}
		got <- w
	}()
	admin := d.admin(t)
	for admin.Exists(ctx, intent).Val() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the waiting writer announced no intent")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := newClient(t, d, goRedis).NewRWMutex(name).Reader().TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("new reader's TryLock while a writer waits = %v; want ErrNotObtained", err)
	}
	if err := r1.Refresh(ctx); err != nil {
		t.Fatalf("a holding reader's Refresh while a writer waits: %v", err)
	}
	select {
	case <-got:
		t.Fatal("the writer got the lock while readers held it")
	case <-time.After(200 * time.Millisecond):
	}
	r1.Release(ctx)
	select {
	case <-got:
		t.Fatal("the writer got the lock while a reader held it")
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	r2.Release(ctx)
	select {
	case w := <-got:
		if w == nil {
			t.FailNow()
		}
		t.Logf("writer got the lock %v after the last reader released", time.Since(start))
		if n := admin.Exists(ctx, intent).Val(); n != 0 {
			t.Errorf("the intent key outlived the writer's grant")
		}
		w.Release(ctx)
	case <-time.After(3 * time.Second):
		t.Fatal("the writer did not get the lock after the readers released")
	}
}

// A reader that never releases (a crash) frees its share within its TTL.
func TestIntegrationRWMutexReaderCrash(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	const ttl = 300 * time.Millisecond
	r, err := newClient(t, d, goRedis).NewRWMutex("rw-crash", redislock.WithTTL(ttl), redislock.WithoutRenewal()).Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w, err := newClient(t, d, goRedis).NewRWMutex("rw-crash").Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	if el := time.Since(start); el > ttl+700*time.Millisecond {
		t.Errorf("the writer waited %v for a crashed reader with TTL %v", el, ttl)
	}
	select {
	case <-r.Done():
	default:
		t.Errorf("the crashed reader's lease is not done after the writer took the lock")
	}
}

// Downgrade turns a write lease into a read lease: other readers come in,
// writers do not until it is released. A reader asking for the write side
// is refused at once.
func TestIntegrationRWMutexDowngradeAndUpgrade(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 15*time.Second)
	const name = "rw-downgrade"
	rw := newClient(t, d, goRedis).NewRWMutex(name)
	other := newClient(t, d, goRedis).NewRWMutex(name)
	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Downgrade(ctx, w)
	if err != nil {
		t.Fatalf("Downgrade: %v", err)
	}
	if !errors.Is(w.Err(), dlock.ErrReleased) || r.Err() != nil {
		t.Fatalf("after Downgrade: write lease Err %v, read lease Err %v; want ErrReleased and nil", w.Err(), r.Err())
	}
	if r.Fence() <= w.Fence() {
		t.Errorf("read lease fence %d not above the write lease's %d", r.Fence(), w.Fence())
	}
	if _, err := rw.Downgrade(ctx, w); !errors.Is(err, dlock.ErrReleased) && !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("second Downgrade of the same write lease = %v; want an error", err)
	}
	r2, err := other.Reader().TryLock(ctx)
	if err != nil {
		t.Fatalf("reader TryLock next to a downgraded lease: %v", err)
	}
	r2.Release(ctx)
	if _, err := other.Writer().TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("writer TryLock while the downgraded lease holds = %v; want ErrNotObtained", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = other.Writer().Lock(wctx)
	cancel()
	if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("writer Lock while the downgraded lease holds = %v; want ErrNotObtained", err)
	}

	// Upgrade: refused at once, by this client and by another one (which
	// learns it from the server).
	for _, try := range []func(context.Context) (dlock.Lease, error){rw.Writer().Lock, rw.Writer().TryLock, other.Writer().Lock} {
		start := time.Now()
		_, err := try(r.Context())
		if !errors.Is(err, redislock.ErrUpgrade) {
			t.Fatalf("write lock through a read lease's Context = %v; want ErrUpgrade", err)
		}
		if el := time.Since(start); el > 100*time.Millisecond {
			t.Errorf("upgrade refused after %v; want at once", el)
		}
	}
	if _, err := rw.Reader().TryLock(r.Context()); !errors.Is(err, redislock.ErrNotReentrant) {
		t.Errorf("read lock through a read lease's Context = %v; want ErrNotReentrant", err)
	}

	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := other.Writer().TryLock(ctx)
	if err != nil {
		t.Fatalf("writer TryLock after the downgraded lease was released: %v", err)
	}
	for _, side := range []dlock.Locker{other.Reader(), other.Writer()} {
		if _, err := side.TryLock(w2.Context()); !errors.Is(err, redislock.ErrNotReentrant) {
			t.Errorf("lock through a write lease's Context = %v; want ErrNotReentrant", err)
		}
	}
	w2.Release(ctx)
}

// Fences strictly increase across successive writers, with readers
// between them.
func TestIntegrationRWMutexFences(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	rws := []*redislock.RWMutex{newClient(t, d, goRedis).NewRWMutex("rw-fence"), newClient(t, d, goRedis).NewRWMutex("rw-fence")}
	var last uint64
	for i := range 20 {
		rw := rws[i%2]
		if i%3 == 0 {
			r, err := rw.Reader().Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.Release(ctx)
		}
		w, err := rw.Writer().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w.Fence() <= last {
			t.Fatalf("writer %d fence %d not above the previous writer's %d", i, w.Fence(), last)
		}
		last = w.Fence()
		w.Release(ctx)
	}
}

// A writer or reader that gives up leaves nothing behind.
func TestIntegrationRWMutexCancellation(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	const name = "rw-cancel"
	writer, readers, intent := rwKeys(name)
	admin := d.admin(t)
	rw := newClient(t, d, goRedis).NewRWMutex(name)
	other := newClient(t, d, goRedis).NewRWMutex(name)

	r, err := rw.Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = other.Writer().Lock(wctx)
	cancel()
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("writer Lock that times out = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	if n := admin.Exists(ctx, writer, intent).Val(); n != 0 {
		t.Fatalf("a writer that gave up left %d key(s) among its writer and intent keys", n)
	}
	r2, err := other.Reader().TryLock(ctx)
	if err != nil {
		t.Fatalf("new reader after the writer gave up: %v", err)
	}
	r2.Release(ctx)
	r.Release(ctx)

	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = other.Reader().Lock(rctx)
	cancel()
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reader Lock that times out = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	if n := admin.ZCard(ctx, readers).Val(); n != 0 {
		t.Fatalf("a reader that gave up left %d member(s)", n)
	}
	w.Release(ctx)
	if n := admin.Exists(ctx, writer, readers, intent).Val(); n != 0 {
		t.Fatalf("%d key(s) left after every holder released", n)
	}
}

// A name in use by another kind of lock is reported as such.
func TestIntegrationRWMutexNameClash(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	for name, other := range map[string]dlock.Locker{"rw-clash-m": c.NewMutex("rw-clash-m"), "rw-clash-r": c.NewReentrantMutex("rw-clash-r")} {
		l, err := other.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rw := c.NewRWMutex(name)
		for _, side := range []dlock.Locker{rw.Reader(), rw.Writer()} {
			if _, err := side.TryLock(ctx); err == nil || !strings.Contains(err.Error(), "held by a") {
				t.Errorf("RWMutex on a %T's name = %v; want an error naming the other kind", other, err)
			}
		}
		l.Release(ctx)
	}
	for _, rw := range []*redislock.RWMutex{c.NewRWMutex(""), c.NewRWMutex("a{b}"), c.NewRWMutex("x", redislock.WithTTL(time.Millisecond))} {
		if _, err := rw.Writer().TryLock(ctx); err == nil || errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("NewRWMutex(%q) with a bad input: TryLock = %v; want an error naming the problem", rw.Name(), err)
		}
	}
}

// Every lease renews on its own: short-TTL readers and writers outlive
// their TTL while held, and the lock is free once they release.
func TestIntegrationRWMutexRenewal(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	// Renewals every TTL/3 that may be 600ms late on a loaded machine
	// (at 150ms, the writer's lease expired beside a second test run).
	const ttl = 900 * time.Millisecond
	rw := newClient(t, d, goRedis).NewRWMutex("rw-renew", redislock.WithTTL(ttl))
	other := newClient(t, d, rueidisClient).NewRWMutex("rw-renew", redislock.WithTTL(ttl))
	r1, err := rw.Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := other.Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	if r1.Err() != nil || r2.Err() != nil {
		t.Fatalf("renewed readers ended: %v, %v", r1.Err(), r2.Err())
	}
	r1.Release(ctx)
	time.Sleep(2 * ttl)
	if _, err := other.Writer().TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("writer TryLock while a renewed reader holds = %v; want ErrNotObtained", err)
	}
	r2.Release(ctx)
	w, err := rw.Writer().TryLock(ctx)
	if err != nil {
		t.Fatalf("writer TryLock after the readers released: %v", err)
	}
	time.Sleep(3 * ttl)
	if w.Err() != nil {
		t.Fatalf("renewed writer ended: %v", w.Err())
	}
	if _, err := other.Reader().TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("reader TryLock while a renewed writer holds = %v; want ErrNotObtained", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatalf("second Release = %v; want nil", err)
	}
}

// All of an RWMutex's keys live on one Cluster slot.
func TestIntegrationRWMutexCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	d := cluster(t)
	waitClusterOK(t, d)
	ctx := timeout(t, 15*time.Second)
	rw := newClient(t, d, goRedis).NewRWMutex("rw-cluster")
	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Downgrade(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := newClient(t, d, rueidisClient).NewRWMutex("rw-cluster").Reader().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.Release(ctx)
	r2.Release(ctx)
	w, err = rw.Writer().TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Release(ctx)
}

// A Downgrade whose reply is lost (its context ends first) may have run:
// the write lease must have ended by the time anyone else can be granted,
// and whatever the request left is given up, so another writer gets the
// lock soon after.
func TestIntegrationRWMutexDowngradeLostReply(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	name := "rw-downgrade-lost"
	var wl atomic.Pointer[dlock.Lease]
	rw := c.NewRWMutex(name, redislock.WithTTL(3*time.Second))
	if w, err := rw.Writer().Lock(ctx); err == nil { // loads the scripts
		if r, err := rw.Downgrade(ctx, w); err == nil {
			r.Release(ctx)
		}
	}
	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wl.Store(&w)
	other := newClient(t, d, goRedis).NewRWMutex(name, redislock.WithTTL(3*time.Second))
	// The reader notes whether the write lease had ended when it was
	// granted. (w is assigned before the reader can be granted.)
	readerSawWriter := make(chan bool, 1)
	go func() {
		if l, err := other.Reader().Lock(ctx); err == nil {
			readerSawWriter <- (*wl.Load()).Err() == nil
			l.Release(ctx)
		}
	}()
	time.Sleep(100 * time.Millisecond) // the reader waits
	p.SetLatency(60 * time.Millisecond)
	dctx, cancel := context.WithTimeout(ctx, 80*time.Millisecond)
	defer cancel()
	r, err := rw.Downgrade(dctx, w)
	if err == nil {
		r.Release(ctx)
		t.Fatal("Downgrade succeeded with 120ms round trips and an 80ms deadline")
	}
	t.Logf("Downgrade: %v", err)
	if w.Err() == nil {
		t.Errorf("the write lease is still held (%v to Until) after a Downgrade of unknown outcome", time.Until(w.Until()))
	}
	select {
	case held := <-readerSawWriter:
		if held {
			t.Error("a reader was granted while the write lease was still held")
		}
	case <-time.After(5 * time.Second):
		t.Error("the waiting reader was not granted within 5s")
	}
	p.SetLatency(0)
	writer, err := other.Writer().Lock(ctx)
	if err != nil {
		t.Fatalf("another writer: %v", err)
	}
	writer.Release(ctx)
}

// Inspect counts the writers waiting for an RWMutex as its waiters.
func TestIntegrationInspectCountsWaitingWriters(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	rw := c.NewRWMutex("inspect-writers")
	r, err := rw.Reader().TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := newClient(t, d, goRedis).NewRWMutex("inspect-writers").Writer().Lock(wctx); err == nil {
			l.Release(ctx)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := c.Inspect(ctx, "inspect-writers")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect with a writer waiting: %+v; want Waiters 1", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	r.Release(ctx)
}
