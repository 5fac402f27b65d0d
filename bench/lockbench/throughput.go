package lockbench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics are the numbers of one run of one scenario for one contender.
type Metrics map[string]float64

// cycle takes and releases key once.
func cycle(ctx context.Context, cl Client, key string) error {
	rel, err := cl.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	if err := rel(ctx); err != nil {
		return fmt.Errorf("release %s: %w", key, err)
	}
	return nil
}

// warm runs cycles on throw-away keys for d, so that connections are open
// and scripts loaded before the timed part.
func warm(cl Client, prefix string, d time.Duration) error {
	ctx := context.Background()
	for i, end := 0, time.Now().Add(d); i < 10 || time.Now().Before(end); i++ {
		if err := cycle(ctx, cl, prefix+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

// runS1: one goroutine, uncontended, a fresh key each cycle.
func runS1(c Contender, addr string, cfg Config) (Metrics, error) {
	cl, err := c.Open(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := warm(cl, "s1w:", cfg.Warmup); err != nil {
		return nil, err
	}
	return serialCycles(cl, "s1:", cfg.Duration)
}

// serialCycles runs lock + release cycles on fresh keys prefix0, prefix1, …
// from one goroutine for d: cycles/s and the p50 and p99 of one cycle.
func serialCycles(cl Client, prefix string, d time.Duration) (Metrics, error) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	end := start.Add(d)
	for i := 0; ; i++ {
		key := prefix + strconv.Itoa(i)
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		if err := cycle(ctx, cl, key); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	return Metrics{
		"ops":    float64(len(lat)) / elapsed.Seconds(),
		"cycles": float64(len(lat)),
		"p50":    float64(percentile(lat, 0.50)),
		"p99":    float64(percentile(lat, 0.99)),
	}, nil
}

// runS2: cfg.Goroutines goroutines on one shared client, each on its own
// sequence of fresh keys. A concurrent warm-up opens the pool first.
func runS2(c Contender, addr string, cfg Config) (Metrics, error) {
	cl, err := c.Open(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if _, err := hammer(cl, cfg.Goroutines, "s2w:", time.Now().Add(cfg.Warmup)); err != nil {
		return nil, err
	}
	start := time.Now()
	n, err := hammer(cl, cfg.Goroutines, "s2:", start.Add(cfg.Duration))
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	return Metrics{"ops": float64(n) / elapsed.Seconds()}, nil
}

// hammer runs lock cycles from n goroutines until end and returns how many
// completed.
func hammer(cl Client, n int, prefix string, end time.Time) (int64, error) {
	ctx := context.Background()
	var (
		ops     atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for g := range n {
		wg.Go(func() {
			p := prefix + strconv.Itoa(g) + ":"
			done := int64(0)
			for i := 0; time.Now().Before(end); i++ {
				if err := cycle(ctx, cl, p+strconv.Itoa(i)); err != nil {
					errOnce.Do(func() { first = err })
					break
				}
				done++
			}
			ops.Add(done)
		})
	}
	wg.Wait()
	return ops.Load(), first
}
