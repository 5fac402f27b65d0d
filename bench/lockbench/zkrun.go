package lockbench

import (
	"context"
	"runtime"
	"strconv"
	"strings"
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
// srv (see runGroup), and stops it.
func (res *Results) runZK(srv *server) {
	res.runGroup(ZKScenarios, res.zk, "Z: ZooKeeper ensemble", func() (func(sc string, c Contender, rep int) (Metrics, error), func(), error) {
		zc, err := startZK()
		if err != nil {
			return nil, nil, err
		}
		res.zookeeper = zc.version
		progress(res.cfg, "Z: ZooKeeper %s ensemble of %d on %s", zc.version, ZKServers, strings.Join(zc.addrs(), " "))
		env := zkEnv{zk: zc, redis: srv}
		return func(sc string, c Contender, rep int) (Metrics, error) { return runZOne(sc, c, env, res.cfg, rep) },
			func() { zc.close() }, nil
	})
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
	after.redis.addPer(before.redis, after.c.LuaInternal, n, m)
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
	return counted(func() (zCounters, error) { return takeCounters(env, c) }, "cycles", func(mark func() error) (Metrics, error) {
		return fixedCycles(clients[0], zName(c, "Z1", rep), cfg, mark)
	})
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
	notified := func() int64 {
		var n int64
		for _, cl := range clients {
			if nf, ok := cl.(notifier); ok {
				n += nf.notifications()
			}
		}
		return n
	}
	var before zCounters
	var notesBefore int64
	m, err := handOver(c, clients, name, "Z2", cfg, func() (err error) {
		before, err = takeCounters(env, c)
		notesBefore = notified()
		return err
	})
	if err != nil {
		return nil, err
	}
	after, err := takeCounters(env, c)
	if err != nil {
		return nil, err
	}
	notes := notified() - notesBefore
	after.per(before, m["acq_all"], m)
	if c.OpenNodes != nil {
		m["notified"] = ratio(float64(notes), m["handoffs_all"])
		d := after.zk.sub(before.zk)
		m["zk_watches"] = ratio(d.watches, m["handoffs_all"])
	}
	return m, nil
}
