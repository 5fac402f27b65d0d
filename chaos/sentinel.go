package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
)

// failoverFaults are the faults of Sentinel and Cluster, apart from their
// own.
var failoverFaults = []string{FaultClientPause, FaultPartition, FaultBlackhole, FaultLatency, FaultReset}

// A master, two replicas and three Sentinels: redislock.Mutex, without and
// with WithReplicas.
var _ = register(&service{
	backends: []string{BackendSentinel, BackendSentinelReplicas},
	needs:    "redis-server", pkg: "redis-server", look: lookRedis,
	start: func(d *deployment, _ int) error {
		d.closers = append(d.closers, d.closeRedis)
		return d.startSentinel()
	},
	connect: func(c *client, _ context.Context, _ time.Duration) (dlock.Locker, func(), error) {
		return c.connectSentinel()
	},
	clientFrom: sentinelData,
	via:        sentinelVia,
	faults: map[string][]string{
		BackendSentinel: append([]string{FaultMasterPartition, FaultMasterKill, FaultMasterPause, FaultReplicationCut},
			failoverFaults...),
		BackendSentinelReplicas: append([]string{FaultMasterPartition, FaultMasterKill, FaultMasterPause, FaultReplicationCut},
			failoverFaults...),
	},
	injects: map[string]injectFunc{
		FaultMasterKill:      injectFailover((*injector).failoverFault),
		FaultMasterPause:     injectFailover((*injector).failoverFault),
		FaultMasterPartition: injectFailover((*injector).failoverFault),
		FaultReplicationCut:  injectReplicationCut,
	},
	// Two masters grant at once under every failover fault, without
	// WithReplicas: see splitBrain.
	splitBrain: func(backend, fault string) bool { return backend == BackendSentinel && failover(fault) },
	expect:     failoverExpect,
})

// failover reports whether fault makes a master fail over.
func failover(fault string) bool {
	return fault == FaultMasterKill || fault == FaultMasterPause || fault == FaultMasterPartition
}

// failoverExpect is what Sentinel and Cluster expect of their faults: see
// service.expect.
func failoverExpect(backend, fault string, _ Kind) string {
	switch {
	case !failover(fault):
		return ""
	case backend == BackendSentinel, backend == BackendCluster:
		return limitFailover
	case fault == FaultMasterPartition: // WithReplicas
		return limitRenewal
	}
	return ""
}

// injectFailover plans a failover fault with plan, which returns its
// target, apply and heal.
func injectFailover(plan func(in *injector, ctx context.Context, kind string) (target string, apply, heal func() error, err error)) injectFunc {
	return func(in *injector, ctx context.Context, f *injection) error {
		var err error
		if f.target, f.apply, f.heal, err = plan(in, ctx, f.kind); err != nil {
			return fmt.Errorf("chaos: %s: %w", f.kind, err)
		}
		// apply lasts until a replica is promoted; the old master stays
		// out a little longer, while the clients move on.
		f.hold = in.between(0, in.ttl)
		return nil
	}
}

// injectReplicationCut plans FaultReplicationCut.
func injectReplicationCut(in *injector, ctx context.Context, f *injection) error {
	var err error
	if f.target, f.apply, f.heal, err = in.replicationCut(ctx); err != nil {
		return fmt.Errorf("chaos: %s: %w", f.kind, err)
	}
	f.hold = in.between(in.ttl, 3*in.ttl)
	return nil
}

// A Sentinel deployment: a master and two replicas (the data servers,
// d.redis[0:3]) and three Sentinels (d.redis[3:6]) that monitor the master
// under sentinelMaster, with a quorum of two.
//
// Every data server announces, and the Sentinels monitor it at, the
// address of a link proxy in front of it, through which replication and
// the Sentinels reach it: blackholing a server's link cuts it off from the
// replicas and the Sentinels but not from the clients. Clients ask the
// Sentinels for the master's (link) address, and reach it through a proxy
// of their own, as they reach the Sentinels.
const (
	sentinelMaster    = "dlock-chaos"
	sentinelData      = 3 // a master and two replicas
	sentinelCount     = 3
	sentinelQuorum    = 2
	sentinelDownAfter = time.Second
	// sentinelFailoverTimeout is Sentinel's failover-timeout: a failover
	// that stalls is retried after twice that.
	sentinelFailoverTimeout = 3 * time.Second
	// failoverBound is how long a fault waits for Sentinel to promote a
	// replica, or for the old master to rejoin as a replica, before it
	// gives up and heals: generous, for a loaded machine.
	failoverBound = 30 * time.Second
)

// sentinelReplicaTimeout is how long sentinel-replicas's acquires wait
// for a replica's acknowledgement: WithReplicas(1, sentinelReplicaTimeout).
func sentinelReplicaTimeout(ttl time.Duration) time.Duration { return ttl / 10 }

// startSentinel starts the servers, their link proxies and the Sentinels,
// and waits until the replicas have synchronised and every Sentinel knows
// the replicas and the other Sentinels, so that a failover can happen.
func (d *deployment) startSentinel() error {
	if _, err := servers.LookBinary("redis-server"); err != nil {
		return err
	}
	for range sentinelData {
		port, err := servers.FreePort()
		if err != nil {
			return err
		}
		link, err := servers.NewProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("chaos: proxy: %w", err)
		}
		d.links = append(d.links, link)
		_, linkPort, _ := net.SplitHostPort(link.Addr())
		// Each data server connects to its master from an address of its
		// own, so that replicationCut can cut replication alone.
		args := []string{"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", linkPort,
			"--bind-source-addr", sentinelSource(len(d.redis))}
		if len(d.redis) > 0 {
			_, masterPort, _ := net.SplitHostPort(d.links[0].Addr())
			args = append(args, "--replicaof", "127.0.0.1", masterPort)
		}
		r, err := servers.LaunchRedis(servers.RedisConfig{Port: port, Args: args})
		if err != nil {
			return err
		}
		d.redis = append(d.redis, r)
		d.nodes = append(d.nodes, node{addr: r.Addr(), proc: r})
	}
	for i := 1; i < sentinelData; i++ {
		if err := waitFor(failoverBound, func() bool { return d.replicating(i) }); err != nil {
			return fmt.Errorf("chaos: replica %s did not synchronise with the master: %w", d.name(i), err)
		}
	}
	for range sentinelCount {
		s, err := servers.LaunchSentinelConfig(servers.SentinelConfig{MasterName: sentinelMaster,
			MasterAddr: d.links[0].Addr(), Quorum: sentinelQuorum, DownAfter: sentinelDownAfter,
			FailoverTimeout: sentinelFailoverTimeout})
		if err != nil {
			return err
		}
		d.redis = append(d.redis, s)
		d.nodes = append(d.nodes, node{addr: s.Addr(), proc: s})
	}
	want := func(s *servers.Redis, what string, n int) bool {
		out, err := s.Do("SENTINEL", what, sentinelMaster)
		return err == nil && strings.Count(out, "\nname\n")+boolInt(strings.HasPrefix(out, "name\n")) >= n
	}
	for _, s := range d.redis[sentinelData:] {
		if err := waitFor(failoverBound, func() bool {
			return want(s, "REPLICAS", sentinelData-1) && want(s, "SENTINELS", sentinelCount-1)
		}); err != nil {
			return fmt.Errorf("chaos: Sentinel %s did not discover the replicas and the other Sentinels: %w", s.Addr(), err)
		}
	}
	return nil
}

// sentinelSource is the address data server i connects to others from.
func sentinelSource(i int) string { return fmt.Sprintf("127.0.0.%d", i+2) }

// replicationCut cuts the master off from its replicas, not from the
// Sentinels or the clients: apply drops the replicas' traffic at the
// master's link and ends their replication connections (CLIENT KILL TYPE
// replica), so that their new ones stall; heal lets traffic through again
// (which resets the stalled connections) and lasts until the replicas are
// in sync again, or ctx is done.
func (in *injector) replicationCut(ctx context.Context) (target string, apply, heal func() error, err error) {
	d := in.d
	m, err := d.master()
	if err != nil {
		return "", nil, nil, err
	}
	var replicas []int
	for i := range sentinelData {
		if i != m {
			replicas = append(replicas, i)
		}
	}
	cut := func(on bool) {
		for _, r := range replicas {
			d.links[m].Cut(sentinelSource(r), on)
		}
	}
	target = d.name(m) + ", the master, from its replicas"
	apply = func() error {
		cut(true)
		_, err := d.redis[m].Do("CLIENT", "KILL", "TYPE", "replica")
		return err
	}
	heal = func() error {
		cut(false)
		return waitFor(failoverBound, func() bool {
			if ctx.Err() != nil {
				return true
			}
			for _, r := range replicas {
				if !d.replicating(r) {
					return false
				}
			}
			return true
		})
	}
	return target, apply, heal, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// replicating reports whether data server i is a replica whose link to its
// master is up.
func (d *deployment) replicating(i int) bool {
	info, err := d.redis[i].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
}

// hasReplica reports whether data server i is a master with a replica
// online.
func (d *deployment) hasReplica(i int) bool {
	info, err := d.redis[i].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:master") && strings.Contains(info, "state=online")
}

// master returns the index of the data server that a majority of the
// Sentinels name as the master.
func (d *deployment) master() (int, error) {
	votes := map[int]int{}
	for _, s := range d.redis[sentinelData:] {
		out, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelMaster)
		if err != nil {
			continue
		}
		addr := strings.Join(strings.Fields(out), ":")
		for i, l := range d.links {
			if l.Addr() == addr {
				votes[i]++
			}
		}
	}
	for i, n := range votes {
		if n > sentinelCount/2 {
			return i, nil
		}
	}
	return 0, errors.New("chaos: the Sentinels do not agree on a master")
}

// failedOver waits until the Sentinels name a master other than old, and
// returns it.
func (d *deployment) failedOver(old int) (int, error) {
	m := old
	err := waitFor(failoverBound, func() bool {
		var err error
		m, err = d.master()
		return err == nil && m != old
	})
	if err != nil {
		return 0, fmt.Errorf("chaos: Sentinel did not fail over from %s: %w", d.name(old), err)
	}
	return m, nil
}

// waitFor polls ok every 50ms until it holds or d has passed.
func waitFor(d time.Duration, ok func() bool) error {
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
	}
	return nil
}

// sentinelVia maps the addresses Sentinel hands out (the data servers'
// links and the Sentinels' own) to client c's proxies to those servers.
func sentinelVia(d *deployment, c int) map[string]string {
	m := map[string]string{}
	for i, p := range d.proxies[c] {
		if i < sentinelData {
			m[d.links[i].Addr()] = p.Addr()
		} else {
			m[d.redis[i].Addr()] = p.Addr()
		}
	}
	return m
}

// failoverFault makes the master fail: apply does it to the master and
// lasts until the Sentinels have promoted a replica; heal undoes it and
// lasts until Sentinel has made the old master a replica of the new one
// (Sentinel waits 8 to 20 seconds before it does) or ctx is done.
func (in *injector) failoverFault(ctx context.Context, kind string) (target string, apply, heal func() error, err error) {
	d := in.d
	// Sentinel takes seconds to make an old master a replica again
	// (it waits for the instance to report its role for a while), so
	// the next fault does not wait for that: only for a master with a
	// replica to promote.
	m := -1
	if err := waitFor(failoverBound, func() bool {
		var err error
		m, err = d.master()
		return err == nil && d.hasReplica(m)
	}); err != nil {
		return "", nil, nil, fmt.Errorf("no master with a replica online: %w", err)
	}
	target = d.name(m) + ", the master"
	r := d.redis[m]
	var do, undo func() error
	switch kind {
	case FaultMasterKill:
		// Back without its data once a replica has taken over: Sentinel
		// makes it a replica of the new master.
		do, undo = r.Kill, r.Restart
	case FaultMasterPause:
		do, undo = r.Pause, r.Resume
	case FaultMasterPartition:
		l := d.links[m]
		do = func() error { l.Blackhole(true); return nil }
		undo = func() error { unblackhole(l); return nil }
	}
	apply = func() error {
		start := time.Now()
		if err := do(); err != nil {
			return err
		}
		n, err := d.failedOver(m)
		if err != nil {
			return err
		}
		in.hist.Add(Event{Op: OpLog, Value: fmt.Sprintf("failover: Sentinel promoted %s %v after the fault",
			d.name(n), time.Since(start).Round(time.Millisecond))})
		return nil
	}
	heal = func() error {
		if err := undo(); err != nil {
			return err
		}
		// Until Sentinel has made the old master a replica, clients that
		// missed the switch may still use it: the fault lasts that long,
		// or until the run ends.
		rejoined := func() bool { return ctx.Err() != nil || d.replicating(m) }
		if err := waitFor(failoverBound, rejoined); err != nil {
			return fmt.Errorf("chaos: the old master %s did not rejoin as a replica: %w", d.name(m), err)
		}
		return nil
	}
	return target, apply, heal, nil
}
