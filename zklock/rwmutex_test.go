package zklock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Many readers or one writer, across independent sessions, with every
// grant fenced above the grants before it.
func TestIntegrationRWMutexExclusion(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	var readers, writers, maxReaders atomic.Int32
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for i := range 8 {
		rw := connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(path)
		wg.Go(func() {
			for round := range 10 {
				write := (i+round)%4 == 0
				side := rw.Reader()
				if write {
					side = rw.Writer()
				}
				lease, err := side.Lock(ctx)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if write {
					if w, r := writers.Add(1), readers.Load(); w != 1 || r != 0 {
						mu.Lock()
						failures = append(failures, "a writer shared the lock")
						mu.Unlock()
					}
				} else {
					n := readers.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					if writers.Load() != 0 {
						mu.Lock()
						failures = append(failures, "a reader shared the lock with a writer")
						mu.Unlock()
					}
				}
				time.Sleep(2 * time.Millisecond)
				if write {
					writers.Add(-1)
				} else {
					readers.Add(-1)
				}
				lease.Release(ctx)
			}
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if maxReaders.Load() < 2 {
		t.Errorf("at most %d reader at a time; readers should share", maxReaders.Load())
	}
}

// A reader that arrives after a waiting writer waits for it; a downgrade
// lets the readers waiting behind the writer in, and not the next writer.
func TestIntegrationRWMutexOrderAndDowngrade(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	adm := admin(t, []string{sharedZK(t).Addr()})
	rw := func() interface {
		Reader() dlock.Locker
		Writer() dlock.Locker
	} {
		return connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(path)
	}
	own := connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(path)
	first, err := own.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 3)
	start := func(name string, l dlock.Locker) chan dlock.Lease {
		c := make(chan dlock.Lease, 1)
		go func() {
			lease, err := l.Lock(ctx)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			got <- name
			c <- lease
		}()
		return c
	}
	r1 := start("reader 1", rw().Reader())
	waitChildren(t, adm, path, 2)
	w2 := start("writer 2", rw().Writer())
	waitChildren(t, adm, path, 3)
	r3 := start("reader 3", rw().Reader())
	waitChildren(t, adm, path, 4)

	// Downgrade: reader 1 (queued before writer 2) comes in; writer 2 and
	// reader 3 (behind writer 2) wait.
	read, err := own.Downgrade(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(first.Err(), dlock.ErrReleased) || read.Err() != nil || read.Fence() != first.Fence() {
		t.Fatalf("after Downgrade: write lease %v, read lease %v, fences %d %d", first.Err(), read.Err(), first.Fence(), read.Fence())
	}
	if name := <-got; name != "reader 1" {
		t.Fatalf("%s got in first after the downgrade; want reader 1", name)
	}
	if _, err := own.Writer().Lock(read.Context()); !errors.Is(err, dlock.ErrUpgrade) {
		t.Errorf("writer under a read lease's Context = %v; want ErrUpgrade", err)
	}
	if _, err := own.Reader().Lock(read.Context()); !errors.Is(err, dlock.ErrNotReentrant) {
		t.Errorf("reader under a read lease's Context = %v; want ErrNotReentrant", err)
	}
	select {
	case name := <-got:
		t.Fatalf("%s got in while a reader still held the lock ahead of writer 2", name)
	case <-time.After(200 * time.Millisecond):
	}
	read.Release(ctx)
	l1 := <-r1
	select {
	case name := <-got:
		t.Fatalf("%s got in while reader 1 held the lock", name)
	case <-time.After(200 * time.Millisecond):
	}
	l1.Release(ctx)
	if name := <-got; name != "writer 2" {
		t.Fatalf("%s got in after the readers; want writer 2", name)
	}
	l2 := <-w2
	if l2.Fence() <= l1.Fence() {
		t.Errorf("writer fence %d after reader fence %d", l2.Fence(), l1.Fence())
	}
	l2.Release(ctx)
	if name := <-got; name != "reader 3" {
		t.Fatalf("%s; want reader 3", name)
	}
	(<-r3).Release(ctx)
	waitChildren(t, adm, path, 0)

	// A lease that is not a write lease of this RWMutex cannot be downgraded.
	r, _ := own.Reader().Lock(ctx)
	if _, err := own.Downgrade(ctx, r); err == nil {
		t.Error("Downgrade of a read lease succeeded")
	}
	r.Release(ctx)
	w, _ := own.Writer().Lock(ctx)
	w.Release(ctx)
	if _, err := own.Downgrade(ctx, w); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("Downgrade of a released write lease = %v; want ErrReleased", err)
	}
}

// A Downgrade whose ctx ends while the mark is on its way: the mark may
// still land and let readers in, so the write lease must end at once, and
// no reader may be granted while it stands.
func TestIntegrationRWMutexDowngradeInterrupted(t *testing.T) {
	proxy := testenv.StartProxy(t, sharedZK(t).Addr())
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	rw := connect(t, []string{proxy.Addr()}).NewRWMutex(path)
	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan dlock.Lease, 1)
	writerErr := make(chan error, 1)
	go func() {
		l, err := connect(t, []string{sharedZK(t).Addr()}).NewRWMutex(path).Reader().Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		writerErr <- w.Err() // as the reader is let in
		got <- l
	}()
	waitChildren(t, admin(t, []string{sharedZK(t).Addr()}), path, 2)
	proxy.SetLatency(100 * time.Millisecond)
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if r, err := rw.Downgrade(dctx, w); err == nil {
		t.Fatalf("Downgrade within 50ms over a 200ms round trip succeeded (%v)", r)
	}
	if !errors.Is(w.Err(), dlock.ErrLost) {
		t.Fatalf("write lease after an interrupted Downgrade: Err %v; want ErrLost", w.Err())
	}
	select {
	case l := <-got:
		if err := <-writerErr; err == nil {
			t.Error("a reader was let in while the write lease stood")
		}
		l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never got in after the write lease ended")
	}
}
