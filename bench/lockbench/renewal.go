package lockbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// r1Workers take and release the R1 leases concurrently.
const r1Workers = 64

// runR1: one dlock client holds cfg.Leases leases with auto-renewal; over
// cfg.Rounds renewal periods (TTL/3) count its round trips, process CPU
// and heap allocation, and check that every lease is still held.
func runR1(transport string, srv *server, cfg Config) (Metrics, error) {
	cc := &countingConn{}
	wrap := func(c redislock.Conn) redislock.Conn { cc.Conn = c; return cc }
	d, err := openDlock(srv.addr(), transport, wrap, redislock.WithTTL(cfg.R1TTL))
	if err != nil {
		return nil, err
	}
	defer d.Close()

	leases := make([]dlock.Lease, cfg.Leases)
	baseHeap := heapAfterGC()
	err = forEach(cfg.Leases, func(i int) error {
		m := d.c.NewMutex("r1:"+strconv.Itoa(i), d.opts...)
		l, err := m.TryLock(context.Background())
		// Taking the leases is not what R1 measures: on a loaded machine
		// one of a million attempts may outlast AttemptTimeout, or be
		// granted too late to be returned; try again (and wait while the
		// clean-up of that attempt, which may have taken the lock, gives
		// it back).
		for try := 1; err != nil && try <= 100; try++ {
			if !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, dlock.ErrNotObtained) {
				break
			}
			time.Sleep(100 * time.Millisecond)
			l, err = m.TryLock(context.Background())
		}
		leases[i] = l
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("taking %d leases: %w", cfg.Leases, err)
	}

	period := cfg.R1TTL / 3
	time.Sleep(period + period/2) // let the first renewal round pass
	before := takeR1Sample(cc, srv)
	time.Sleep(time.Duration(cfg.Rounds) * period)
	after := takeR1Sample(cc, srv)
	// What the held leases keep alive, once renewal has run Rounds
	// periods: the heap in use after a GC, less that before the first
	// Lock (the leases slice, 16 bytes a lease, is counted), ÷ leases.
	heapLease := float64(int64(heapAfterGC())-int64(baseHeap)) / float64(cfg.Leases)
	if cfg.R1HeapProfile != "" {
		if err := writeHeapProfile(cfg.R1HeapProfile); err != nil {
			return nil, err
		}
	}

	lost := 0
	minValid := time.Duration(math.MaxInt64)
	for _, l := range leases {
		left := time.Until(l.Until())
		if l.Err() != nil || left <= 0 {
			lost++
		}
		minValid = min(minValid, left)
	}
	rounds := after.at.Sub(before.at).Seconds() / period.Seconds()
	evals := float64(after.evals - before.evals)
	m := Metrics{
		"leases":        float64(cfg.Leases),
		"rounds":        rounds,
		"rt_round":      evals / rounds,
		"renewed_round": float64(after.calls-before.calls) / rounds,
		"leases_rt":     ratio(float64(after.calls-before.calls), evals),
		"max_batch":     float64(cc.maxBatch.Load()),
		"cpu_round":     float64(after.cpu-before.cpu) / rounds,
		"srv_cpu_round": float64(after.srvCPU-before.srvCPU) / rounds,
		"alloc_round":   float64(after.alloc-before.alloc) / rounds,
		"lost":          float64(lost),
		"heap_lease":    heapLease,
		"min_left":      float64(minValid),
	}
	err = forEach(cfg.Leases, func(i int) error { return leases[i].Release(context.Background()) })
	if err != nil && lost == 0 {
		return nil, fmt.Errorf("releasing the leases: %w", err)
	}
	return m, nil
}

// heapAfterGC returns the heap in use after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// writeHeapProfile writes the heap profile (after a GC) to file.
func writeHeapProfile(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("R1 heap profile: %w", err)
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("R1 heap profile: %w", err)
	}
	return nil
}

type r1Sample struct {
	at           time.Time
	evals, calls int64
	cpu, srvCPU  time.Duration
	alloc        uint64
}

func takeR1Sample(cc *countingConn, srv *server) r1Sample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return r1Sample{at: time.Now(), evals: cc.evals.Load(), calls: cc.calls.Load(),
		cpu: processCPU(), srvCPU: srv.cpu(), alloc: ms.TotalAlloc}
}

// processCPU returns this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// forEach runs f(0..n-1) on r1Workers goroutines and returns the first error.
func forEach(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := range r1Workers {
		wg.Go(func() {
			for i := w; i < n; i += r1Workers {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
