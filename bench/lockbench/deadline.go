package lockbench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Every call the benchmark makes to a contender has a deadline, and every
// run of one contender a bound: a library that hangs (one S2 run once
// waited 17 minutes inside a peer's Lock) costs the run a counted timeout,
// or at worst that run, never the whole benchmark.

// CallTimeout bounds one Lock or Release (a blocking Lock in S3-like
// loops is bounded by its loop's own deadline instead). No uncontended
// call comes near it. A variable for the tests.
var CallTimeout = 10 * time.Second

// runSlack is what a run's bound allows beyond its measured parts: set-up
// (connecting, loading scripts) and tear-down. A variable for the tests.
var runSlack = time.Minute

// errCallTimeout matches, under errors.Is, the error of a call that was
// still running at its deadline.
var errCallTimeout = errors.New("no reply within the call's deadline")

// callContext returns ctx bounded by CallTimeout.
func callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, CallTimeout)
}

// deadlineErr returns err, marked as a timeout (errCallTimeout) when the
// call failed because its own deadline, cctx's, passed.
func deadlineErr(cctx context.Context, err error) error {
	if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (%s): %w", errCallTimeout, CallTimeout, err)
	}
	return err
}

// release calls rel with a deadline.
func release(ctx context.Context, rel Release) error {
	cctx, cancel := callContext(ctx)
	defer cancel()
	return deadlineErr(cctx, rel(cctx))
}

// RunBound is the longest one run of one contender may take under cfg.
func RunBound(cfg Config) time.Duration { return cfg.runBound() }

// runBound is the longest one run of one contender may take: its
// measured part, warm-up and set-up, and a few calls at their deadline.
// A run still going then has a call that ignored its context.
func (c Config) runBound() time.Duration {
	renewal := c.R1TTL * time.Duration(c.Rounds+2) // R1 measures Rounds periods of TTL/3, and releases
	// R1 takes and releases its leases: on 2 loaded cores 1,000,000 took
	// about 3 minutes each way.
	leases := time.Duration(c.Leases) * 400 * time.Microsecond
	return 4*max(c.Duration, c.s4Duration()) + c.Warmup + renewal + leases + 3*CallTimeout + runSlack
}

// errRunLimit is recorded for the runs not started because the whole
// benchmark's limit (Config.Limit) had passed.
var errRunLimit = errors.New("not run: the benchmark's time limit (-limit) had passed")

// bounded runs f, the run of one scenario for one contender, within
// cfg.runBound. If f does not return by then it is abandoned (its
// goroutines keep running, and its client stays open) and the run is
// recorded as an error. Once the whole benchmark's limit has passed, f is
// not run at all.
func (res *Results) bounded(f func() (Metrics, error)) (Metrics, error) {
	cfg := res.cfg
	if cfg.Limit > 0 && time.Since(res.start) > cfg.Limit {
		return nil, errRunLimit
	}
	type result struct {
		m   Metrics
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := f()
		done <- result{m, err}
	}()
	t := time.NewTimer(cfg.runBound())
	defer t.Stop()
	select {
	case r := <-done:
		return r.m, r.err
	case <-t.C:
		res.abandoned++
		return nil, fmt.Errorf("the run did not end within its bound of %s (a call ignored its deadline); abandoned", cfg.runBound())
	}
}
