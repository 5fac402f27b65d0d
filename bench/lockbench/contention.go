package lockbench

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"
)

// holding is one acquisition in S3, timed in this process.
type holding struct {
	client   int
	asked    time.Time // Lock called
	acquired time.Time // Lock returned
	relStart time.Time // Release called
	relEnd   time.Time // Release returned
}

// runS3: cfg.Clients independent clients contend for one key with their
// blocking Lock; each holder spins for cfg.Hold, releases, and asks again
// at once.
func runS3(c Contender, srv *server, cfg Config, rep int) (Metrics, error) {
	clients, err := openAll(c, srv.addr(), cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	key := "s3:" + strconv.Itoa(rep)
	for i, cl := range clients { // connect and load scripts
		if err := cycle(context.Background(), cl, key+":warm:"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}

	before, err := srv.snapshot()
	if err != nil {
		return nil, err
	}
	cpu0, waits0 := srv.cpu(), readWaits()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
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
		failOnce.Do(func() { progress(cfg, "  %s S3: first failed %s (client %d): %v", c.Name, what, id, err) })
	}
	for id, cl := range clients {
		wg.Go(func() {
			// The deadline check stops a client whose Lock failed because
			// a transport saw the deadline pass before ctx.Err was set.
			for ctx.Err() == nil && time.Now().Before(end) {
				asked := time.Now()
				rel, err := cl.Lock(ctx, key)
				acquired := time.Now()
				if err != nil {
					if ctx.Err() == nil && time.Now().Before(end) {
						fail(id, "Lock", err) // e.g. redsync giving up after 32 tries
					}
					continue
				}
				spin(cfg.Hold)
				h := holding{client: id, asked: asked, acquired: acquired, relStart: time.Now()}
				if err := release(context.Background(), rel); err != nil {
					fail(id, "Release", err)
				}
				h.relEnd = time.Now()
				if acquired.Before(end) {
					logs[id] = append(logs[id], h)
				}
			}
		})
	}
	wg.Wait()
	cpu1, waits1 := srv.cpu(), readWaits()
	after, err := srv.snapshot()
	if err != nil {
		return nil, err
	}

	m := analyzeS3(slices.Concat(logs...), len(clients), cfg.Duration)
	all, sent := after.sub(before, c.LuaInternal)
	n := m["acquisitions"]
	m["cmds_all"] = ratio(float64(all), n)
	m["cmds_client"] = ratio(float64(sent), n)
	m["srv_cpu_acq"] = ratio(float64(cpu1-cpu0), n)
	if c.DlockTransport != "" {
		m["waited_acq"] = ratio(float64(waits1.waited-waits0.waited), n)
		m["notices_acq"] = ratio(float64(waits1.notices-waits0.notices), n)
		m["polls"] = float64(waits1.polls - waits0.polls)
	}
	total := 0
	for _, f := range fails {
		total += f
	}
	m["failures"] = float64(total)
	return m, nil
}

// analyzeS3 orders the holdings (mutual exclusion orders them by
// acquisition) and measures hand-overs. For every release, the handoff is
// the time from that Release returning to the next acquisition, in
// ownership order, by a different client; it is negative when that
// client's Lock returned before the releaser's Release did. The "from
// call" variant starts the clock when Release is called instead.
func analyzeS3(hs []holding, clients int, d time.Duration) Metrics {
	slices.SortFunc(hs, func(a, b holding) int { return a.acquired.Compare(b.acquired) })
	var fromEnd, fromStart []time.Duration
	overlaps, switches := 0, 0
	next := len(hs) // index of the next holding by another client than hs[i]'s
	for i := len(hs) - 1; i >= 0; i-- {
		if i+1 < len(hs) && hs[i+1].client != hs[i].client {
			next = i + 1
			switches++
		}
		if i+1 < len(hs) && hs[i+1].acquired.Before(hs[i].relStart) {
			overlaps++ // granted while still held: a safety violation
		}
		if next < len(hs) {
			fromEnd = append(fromEnd, hs[next].acquired.Sub(hs[i].relEnd))
			fromStart = append(fromStart, hs[next].acquired.Sub(hs[i].relStart))
		}
	}
	per := make([]int, clients)
	waits := make([]time.Duration, 0, len(hs))
	for _, h := range hs {
		per[h.client]++
		waits = append(waits, h.acquired.Sub(h.asked))
	}
	n := float64(len(hs))
	fair := n / float64(clients)
	minShare, maxShare := slices.Min(per), slices.Max(per)
	return Metrics{
		"acquisitions":  n,
		"acq_s":         n / d.Seconds(),
		"handoff_p50":   float64(percentile(fromEnd, 0.50)),
		"handoff_p99":   float64(percentile(fromEnd, 0.99)),
		"handoff_call":  float64(percentile(fromStart, 0.50)),
		"handoff_share": ratio(float64(switches), n-1),
		"share_min":     ratio(float64(minShare), fair),
		"share_max":     ratio(float64(maxShare), fair),
		"overlaps":      float64(overlaps),
		"wait_p99":      float64(percentile(waits, 0.99)),
		// Under a strict rotation every Lock waits for the other
		// clients' holds: clients-1 acquisitions' time.
		"wait_fair": ratio(float64(clients-1)*float64(d), n),
	}
}
