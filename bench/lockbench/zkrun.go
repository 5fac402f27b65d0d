package lockbench

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ZKScenarios are the scenarios that need the ZooKeeper ensemble.
var ZKScenarios = []string{"Z1", "Z2"}

// zkEnv is what Z1 and Z2 run against: the ensemble and the program's
// redis-server.
type zkEnv struct {
	zk    *zkCluster
	redis *server
}

// runZK starts the ensemble, runs the selected Z scenarios on it and on
// srv, and stops it. Within each scenario every repetition runs each
// contender once, round-robin in an order rotated between repetitions,
// after one discarded warm-up run.
func (res *Results) runZK(srv *server) {
	cfg := res.cfg
	var selected []string
	for _, sc := range ZKScenarios {
		if slices.Contains(cfg.Scenarios, sc) {
			selected = append(selected, sc)
			res.runs[sc], res.errs[sc] = map[string][]Metrics{}, map[string][]string{}
		}
	}
	if len(selected) == 0 {
		return
	}
	zc, err := startZK()
	if err != nil {
		progress(cfg, "Z: ZooKeeper ensemble: %v", err)
		for _, sc := range selected {
			for _, c := range res.zk {
				res.record(sc, c.Name, 0, nil, err)
			}
		}
		return
	}
	defer zc.close()
	res.zookeeper = zc.version
	progress(cfg, "Z: ZooKeeper %s ensemble of %d on %s", zc.version, ZKServers, strings.Join(zc.addrs(), " "))
	env := zkEnv{zk: zc, redis: srv}
	group := res.zk
	for _, sc := range selected {
		_, err := runZOne(sc, group[0], env, cfg, -1)
		progress(cfg, "%s warm-up run (discarded) %s", sc, brief(nil, err))
		for rep := range cfg.Reps {
			for i := range group {
				c := group[(i+rep)%len(group)]
				m, err := runZOne(sc, c, env, cfg, rep)
				res.record(sc, c.Name, rep, m, err)
				progress(cfg, "%s rep %d/%d %-12s %s", sc, rep+1, cfg.Reps, c.Name, brief(m, err))
			}
		}
	}
}

func runZOne(sc string, c Contender, env zkEnv, cfg Config, rep int) (Metrics, error) {
	if err := env.redis.flush(); err != nil {
		return nil, err
	}
	runtime.GC()
	if sc == "Z1" {
		return runZ1(c, env, cfg, rep)
	}
	return runZ2(c, env, cfg, rep)
}

// zName is the lock path (ZooKeeper) or key (Redis) of one run: its own
// per contender, scenario and repetition. The ZooKeeper contenders have
// separate roots, since zklock makes its parents container nodes and
// zk.Lock persistent ones.
func zName(c Contender, sc string, rep int) string {
	run := "warmup"
	if rep >= 0 {
		run = "rep" + strconv.Itoa(rep)
	}
	switch c.Name {
	case ZKDlockName:
		return "/lockbench-dlock-zk/" + strings.ToLower(sc) + "-" + run
	case ZKPeerName:
		return "/lockbench-zk-lock/" + strings.ToLower(sc) + "-" + run
	}
	return strings.ToLower(sc) + ":" + run
}

// zCounters are the server-side counters around the measured part of a
// run: mntr for ZooKeeper contenders, INFO for the Redis one.
type zCounters struct {
	env   zkEnv
	c     Contender
	zk    zkStats
	redis stats
}

func takeCounters(env zkEnv, c Contender) (zCounters, error) {
	s := zCounters{env: env, c: c}
	var err error
	if c.OpenNodes != nil {
		s.zk, err = env.zk.snapshot()
	} else {
		s.redis, err = env.redis.snapshot()
	}
	return s, err
}

// per adds the counters' deltas since before, divided by n, to m.
func (after zCounters) per(before zCounters, n float64, m Metrics) {
	if after.c.OpenNodes != nil {
		d := after.zk.sub(before.zk)
		m["zk_req"] = ratio(d.packets, n)
		m["zk_reads"] = ratio(d.reads, n)
		m["zk_writes"] = ratio(d.writes, n)
		m["zk_children"] = ratio(d.children, n)
		m["zk_getdata"] = ratio(d.getData, n)
		m["zk_other_reads"] = ratio(d.reads-d.children-d.getData, n)
		return
	}
	all, sent := after.redis.sub(before.redis, after.c.LuaInternal)
	m["redis_cmds_client"] = ratio(float64(sent), n)
	m["redis_cmds_all"] = ratio(float64(all), n)
}

// runZ1: one client, one goroutine, lock + release on one fixed path (or
// key), uncontended: cycles/s, p50 and p99 of a cycle, and server
// requests per cycle.
func runZ1(c Contender, env zkEnv, cfg Config, rep int) (Metrics, error) {
	clients, err := openZ(c, env, 1)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	cl, name := clients[0], zName(c, "Z1", rep)
	ctx := context.Background()
	for i, end := 0, time.Now().Add(cfg.Warmup); i < 10 || time.Now().Before(end); i++ {
		if err := cycle(ctx, cl, name); err != nil {
			return nil, err
		}
	}
	before, err := takeCounters(env, c)
	if err != nil {
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
	after, err := takeCounters(env, c)
	if err != nil {
		return nil, err
	}
	n := float64(len(lat))
	m := Metrics{"ops": n / elapsed.Seconds(), "cycles": n,
		"p50": float64(percentile(lat, 0.50)), "p99": float64(percentile(lat, 0.99))}
	after.per(before, n, m)
	return m, nil
}

// runZ2 is S3's hand-over loop for Z2's contenders: cfg.Clients
// independent clients (each its own session or Redis client) take one
// lock with their blocking Lock, hold it for cfg.Hold of busy work,
// release it and ask again at once. Clients stop asking at the run's end;
// one still waiting then takes the lock once more and releases it (the
// drain), so that no waiter is cancelled: a cancelled ZooKeeper waiter
// deletes its node, which would wake the next one for nothing. Latency,
// shares and acq/s count acquisitions before the end, as S3 does; the
// counters (notifications, requests) cover the whole loop, drain included,
// and are divided by all its acquisitions or hand-overs.
func runZ2(c Contender, env zkEnv, cfg Config, rep int) (Metrics, error) {
	clients, err := openZ(c, env, cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	name := zName(c, "Z2", rep)
	for i, cl := range clients { // sessions up, scripts loaded, parents made
		if err := cycle(context.Background(), cl, name+"-warm"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	if err := cycle(context.Background(), clients[0], name); err != nil {
		return nil, err
	}
	notified := func() int64 {
		var n int64
		for _, cl := range clients {
			if nf, ok := cl.(notifier); ok {
				n += nf.notifications()
			}
		}
		return n
	}

	before, err := takeCounters(env, c)
	if err != nil {
		return nil, err
	}
	notesBefore := notified()
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
		failOnce.Do(func() { progress(cfg, "  %s Z2: first failed %s (client %d): %v", c.Name, what, id, err) })
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
				if err := rel(context.Background()); err != nil {
					fail(id, "Release", err)
				}
				h.relEnd = time.Now()
				logs[id] = append(logs[id], h)
			}
		})
	}
	wg.Wait()
	after, err := takeCounters(env, c)
	if err != nil {
		return nil, err
	}
	notes := notified() - notesBefore
	if ctx.Err() != nil {
		return nil, errors.New("Z2: the loop outlived its safety timeout (a Lock never returned)")
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
	n := float64(len(all))
	m["acq_all"], m["handoffs_all"] = n, float64(switches)
	after.per(before, n, m)
	if c.OpenNodes != nil {
		m["notified"] = ratio(float64(notes), float64(switches))
		d := after.zk.sub(before.zk)
		m["zk_watches"] = ratio(d.watches, float64(switches))
	}
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
