package lockbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics are the numbers of one run of one scenario for one contender.
type Metrics map[string]float64

// cycle takes and releases key once, each call with its deadline: an
// error matching errCallTimeout says one of them ran out of time.
func cycle(ctx context.Context, cl Client, key string) error {
	cctx, cancel := callContext(ctx)
	rel, err := cl.Lock(cctx, key)
	err = deadlineErr(cctx, err)
	cancel()
	if err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	if err := release(ctx, rel); err != nil {
		return fmt.Errorf("release %s: %w", key, err)
	}
	return nil
}

// timeouts counts the cycles of a run that ran out of time.
type timeouts struct{ n atomic.Int64 }

// add reports whether err is a timeout, counting it if so.
func (t *timeouts) add(err error) bool {
	if !errors.Is(err, errCallTimeout) {
		return false
	}
	t.n.Add(1)
	return true
}

// put stores the count in m, as "timeouts".
func (t *timeouts) put(m Metrics) Metrics {
	m["timeouts"] = float64(t.n.Load())
	return m
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

// runS1: one goroutine, uncontended, a fresh key each cycle, with the
// server's commands and CPU time per cycle.
func runS1(c Contender, srv *server, cfg Config) (Metrics, error) {
	cl, err := c.Open(srv.addr())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := warm(cl, "s1w:", cfg.Warmup); err != nil {
		return nil, err
	}
	u0, err := srv.use()
	if err != nil {
		return nil, err
	}
	m, err := serialCycles(cl, "s1:", cfg.Duration)
	if err != nil {
		return nil, err
	}
	return m, srv.addUse(u0, c.LuaInternal, m["cycles"], m)
}

// serialCycles runs lock + release cycles on fresh keys prefix0, prefix1, …
// from one goroutine for d: cycles/s, the p50 and p99 of one cycle, and
// the cycles that ran out of time (counted, left out of the rest).
func serialCycles(cl Client, prefix string, d time.Duration) (Metrics, error) {
	ctx := context.Background()
	var to timeouts
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
			if to.add(err) {
				continue
			}
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	return to.put(Metrics{
		"ops":    float64(len(lat)) / elapsed.Seconds(),
		"cycles": float64(len(lat)),
		"p50":    float64(percentile(lat, 0.50)),
		"p99":    float64(percentile(lat, 0.99)),
	}), nil
}

// runS2: cfg.Goroutines goroutines on one shared client, each on its own
// sequence of fresh keys, with the server's commands and CPU time per
// cycle. A concurrent warm-up opens the pool first.
func runS2(c Contender, srv *server, cfg Config) (Metrics, error) {
	cl, err := c.Open(srv.addr())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var warmTo, to timeouts // the warm-up's are not the run's
	if _, err := hammer(cl, cfg.Goroutines, "s2w:", time.Now().Add(cfg.Warmup), &warmTo); err != nil {
		return nil, err
	}
	u0, err := srv.use()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n, err := hammer(cl, cfg.Goroutines, "s2:", start.Add(cfg.Duration), &to)
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	m := to.put(Metrics{"ops": float64(n) / elapsed.Seconds(), "cycles": float64(n)})
	return m, srv.addUse(u0, c.LuaInternal, float64(n), m)
}

// hammer runs lock cycles from n goroutines until end and returns how many
// completed. A cycle that runs out of time is counted in to, and its
// goroutine goes on with the next key; any other error ends the goroutine
// and is returned.
func hammer(cl Client, n int, prefix string, end time.Time, to *timeouts) (int64, error) {
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
					if to.add(err) {
						continue
					}
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
