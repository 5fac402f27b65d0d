package redislock_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// maxHeapPerLease bounds the Go heap that one held lease of a Mutex made
// for it keeps alive, with renewal on: its Mutex and keys, its lease
// state, its place in the client's registry, the renewal scheduler and the
// expiry heap. Measured 760–800 B (issue 35; 1.3 KB before, with a
// timer and a Lock call's context per lease); the bound leaves room for
// the maps' growth steps and noise, not for a timer or a context per lease
// coming back.
const maxHeapPerLease = 900

// A process that holds many leases keeps less than maxHeapPerLease of heap
// per lease: the heap in use after a GC grows by no more than that per
// lease while 10,000 leases are held, and none is lost.
func TestIntegrationHeldLeaseHeap(t *testing.T) {
	if apart(t) { // the heap must be this test's alone
		return
	}
	d := standalone(t)
	ctx := timeout(t, 3*time.Minute)
	c := newClient(t, d, goRedis)
	const n, workers = 10000, 16
	// Renewal is on, but no renewal batch is due (and in flight, with its
	// requests) when the heap is measured, however slowly a loaded
	// machine takes the leases: the first is due at ttl/3.
	const ttl = time.Minute
	take := func(name string) (dlock.Lease, error) {
		return c.NewMutex(name, redislock.WithTTL(ttl)).TryLock(ctx)
	}
	parallel := func(f func(i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					if err := f(i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Warm up: the connections' buffers and the pools exist before the
	// measure.
	parallel(func(i int) error {
		if i >= 4*workers {
			return nil
		}
		l, err := take("heap-warm-" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		return l.Release(ctx)
	})

	leases := make([]dlock.Lease, n)
	before := heapAfterGC()
	parallel(func(i int) (err error) {
		leases[i], err = take("heap-" + strconv.Itoa(i))
		return err
	})
	after := heapAfterGC()
	per := (float64(after) - float64(before)) / n
	t.Logf("%d leases held: %.0f B of heap per lease (bound %d B)", n, per, maxHeapPerLease)
	if per > maxHeapPerLease {
		t.Errorf("%d held leases keep %.0f B of heap each; want at most %d B", n, per, maxHeapPerLease)
	}
	lost := 0
	for _, l := range leases {
		if l.Err() != nil || time.Until(l.Until()) <= 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d leases lost while held", lost, n)
	}
	parallel(func(i int) error { return leases[i].Release(context.WithoutCancel(ctx)) })
	for i, l := range leases {
		if l.Err() != dlock.ErrReleased {
			t.Fatalf("lease %d after Release: Err = %v", i, l.Err())
		}
	}
	runtime.KeepAlive(leases)
}

// heapAfterGC returns the heap in use after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
