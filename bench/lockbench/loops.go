package lockbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The loops that the Z and P scenarios share: running a group of
// scenarios on servers of their own, counting around a measured part, one
// client's fixed-name cycles, and the hand-over loop.

// runGroup runs those of scenarios that were selected, for every contender
// of group, on servers that start starts: it returns how to run one
// scenario for one contender and repetition (rep -1 is a warm-up), and how
// to stop the servers. If they do not start, every run records the error
// (what says which servers). Within each scenario, after one discarded
// warm-up run of the first contender, every repetition runs each contender
// once, round-robin in an order rotated between repetitions.
func (res *Results) runGroup(scenarios []string, group []Contender, what string,
	start func() (run func(sc string, c Contender, rep int) (Metrics, error), stop func(), err error)) {
	cfg := res.cfg
	var selected []string
	for _, sc := range scenarios {
		if slices.Contains(cfg.Scenarios, sc) {
			selected = append(selected, sc)
			res.runs[sc], res.errs[sc] = map[string][]Metrics{}, map[string][]string{}
		}
	}
	if len(selected) == 0 {
		return
	}
	run, stop, err := start()
	if err != nil {
		progress(cfg, "%s: %v", what, err)
		for _, sc := range selected {
			for _, c := range group {
				res.record(sc, c.Name, 0, nil, err)
			}
		}
		return
	}
	defer stop()
	for _, sc := range selected {
		_, err := res.bounded(func() (Metrics, error) { return run(sc, group[0], -1) })
		progress(cfg, "%s warm-up run (discarded) %s", sc, brief(nil, err))
		for rep := range cfg.Reps {
			for i := range group {
				c := group[(i+rep)%len(group)]
				m, err := res.bounded(func() (Metrics, error) { return run(sc, c, rep) })
				res.record(sc, c.Name, rep, m, err)
				progress(cfg, "%s rep %d/%d %-16s %s", sc, rep+1, cfg.Reps, c.Name, brief(m, err))
			}
		}
	}
}

// counted runs f, which calls mark once, just before its measured part;
// it takes counters with take at mark and after f, and adds their deltas,
// divided by f's metric per, to f's metrics.
func counted[C interface{ per(C, float64, Metrics) }](take func() (C, error), per string, f func(mark func() error) (Metrics, error)) (Metrics, error) {
	var before C
	m, err := f(func() (err error) {
		before, err = take()
		return err
	})
	if err != nil {
		return nil, err
	}
	after, err := take()
	if err != nil {
		return nil, err
	}
	after.per(before, m[per], m)
	return m, nil
}

// fixedCycles is Z1's and P1's loop: cfg.Warmup of untimed lock + release
// cycles of name on cl (at least 10), then mark (to take counters), then
// cycles for cfg.Duration: cycles/s, cycles, and p50 and p99 of a cycle.
func fixedCycles(cl Client, name string, cfg Config, mark func() error) (Metrics, error) {
	ctx := context.Background()
	for i, end := 0, time.Now().Add(cfg.Warmup); i < 10 || time.Now().Before(end); i++ {
		if err := cycle(ctx, cl, name); err != nil {
			return nil, err
		}
	}
	if err := mark(); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, 1<<14)
	start := time.Now()
	for end := start.Add(cfg.Duration); ; {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		if err := cycle(ctx, cl, name); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	n := float64(len(lat))
	return Metrics{"ops": n / elapsed.Seconds(), "cycles": n,
		"p50": float64(percentile(lat, 0.50)), "p99": float64(percentile(lat, 0.99))}, nil
}

// handOver is Z2's and P2's loop, S3's with a drain: one untimed cycle of
// name, then mark (to take counters), then the clients take name with
// their blocking Lock, hold it for cfg.Hold of busy work, release it and
// ask again at once, until cfg.Duration has passed. A client still waiting
// then takes the lock once more and releases it, so that no waiter is
// cancelled. Latency, shares and acq/s count acquisitions before the end,
// as S3 does; acq_all and handoffs_all count the whole loop, drain
// included.
func handOver(c Contender, clients []Client, name, sc string, cfg Config, mark func() error) (Metrics, error) {
	if err := cycle(context.Background(), clients[0], name); err != nil {
		return nil, err
	}
	if err := mark(); err != nil {
		return nil, err
	}
	// A safety net only: no Lock is meant to be cancelled (see above).
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+time.Minute)
	defer cancel()
	start := time.Now()
	end := start.Add(cfg.Duration)
	logs := make([][]holding, len(clients))
	fails := make([]int, len(clients))
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
	)
	fail := func(id int, what string, err error) {
		fails[id]++
		failOnce.Do(func() { progress(cfg, "  %s %s: first failed %s (client %d): %v", c.Name, sc, what, id, err) })
	}
	for id, cl := range clients {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				rel, err := cl.Lock(ctx, name)
				acquired := time.Now()
				if err != nil {
					fail(id, "Lock", err)
					continue
				}
				spin(cfg.Hold)
				h := holding{client: id, acquired: acquired, relStart: time.Now()}
				if err := release(context.Background(), rel); err != nil {
					fail(id, "Release", err)
				}
				h.relEnd = time.Now()
				logs[id] = append(logs[id], h)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: the loop outlived its safety timeout (a Lock never returned)", sc)
	}

	all := slices.Concat(logs...)
	slices.SortFunc(all, func(a, b holding) int { return a.acquired.Compare(b.acquired) })
	inRun := slices.DeleteFunc(slices.Clone(all), func(h holding) bool { return !h.acquired.Before(end) })
	m := analyzeS3(inRun, len(clients), cfg.Duration)
	calls := handoffsFromCall(inRun)
	m["handoff_call"] = float64(percentile(calls, 0.50))
	m["handoff_call_p99"] = float64(percentile(calls, 0.99))
	m["handoff_call_max"] = float64(percentile(calls, 1))
	if len(all) > 0 {
		m["first_acq"] = float64(all[0].acquired.Sub(start))
	}
	switches := 0
	for i := 1; i < len(all); i++ {
		if all[i].client != all[i-1].client {
			switches++
		}
	}
	m["acq_all"], m["handoffs_all"] = float64(len(all)), float64(switches)
	total := 0
	for _, f := range fails {
		total += f
	}
	m["failures"] = float64(total)
	return m, nil
}

// handoffsFromCall returns, for every holding of hs (sorted by
// acquisition) that another client's holding follows, the time from its
// Release call to that next acquisition: analyzeS3's "from call" handoff,
// all of them, for percentiles other than the median.
func handoffsFromCall(hs []holding) []time.Duration {
	var out []time.Duration
	next := len(hs)
	for i := len(hs) - 1; i >= 0; i-- {
		if i+1 < len(hs) && hs[i+1].client != hs[i].client {
			next = i + 1
		}
		if next < len(hs) {
			out = append(out, hs[next].acquired.Sub(hs[i].relStart))
		}
	}
	return out
}
