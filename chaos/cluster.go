package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/servers"
)

// A Cluster deployment: three masters with a replica each (the replica of
// master i is node 3+i), a node timeout of clusterNodeTimeout, and link
// proxies that the nodes announce as their addresses, so that a master can
// be cut off from the other nodes but not from the clients. Clients seed
// go-redis's cluster client with their proxies to the nodes, and their
// dialer reroutes the announced addresses to those proxies.
const (
	clusterMasters     = 3
	clusterNodeTimeout = time.Second
)

// clusterReplicaTimeout is how long cluster-replicas's acquires wait for a
// replica's acknowledgement: WithReplicas(1, clusterReplicaTimeout).
func clusterReplicaTimeout(ttl time.Duration) time.Duration { return ttl / 10 }

// A Redis Cluster: redislock.Mutex, without and with WithReplicas.
var _ = register(&service{
	backends: []string{BackendCluster, BackendClusterReplicas},
	needs:    "redis-server", pkg: "redis-server", look: lookRedis,
	start: startCluster,
	connect: func(c *client, _ context.Context, _ time.Duration) (dlock.Locker, func(), error) {
		return c.connectCluster()
	},
	via: clusterVia,
	faults: map[string][]string{
		BackendCluster:         append([]string{FaultMigrate, FaultMasterKill, FaultMasterPartition, FaultMasterPause}, failoverFaults...),
		BackendClusterReplicas: append([]string{FaultMigrate, FaultMasterKill, FaultMasterPartition, FaultMasterPause}, failoverFaults...),
	},
	injects: map[string]injectFunc{
		FaultMasterKill:      injectFailover((*injector).clusterFailoverFault),
		FaultMasterPause:     injectFailover((*injector).clusterFailoverFault),
		FaultMasterPartition: injectFailover((*injector).clusterFailoverFault),
		FaultMigrate:         injectMigrate,
	},
	// Two masters grant at once only when the old one is paused and
	// resumed: see splitBrain.
	splitBrain: func(backend, fault string) bool { return backend == BackendCluster && fault == FaultMasterPause },
	expect:     failoverExpect,
})

// redisCluster returns the Redis Cluster of d.
func redisCluster(d *deployment) *servers.Cluster { return d.state.(*servers.Cluster) }

func startCluster(d *deployment, _ int) error {
	if _, err := servers.LookBinary("redis-server"); err != nil {
		return err
	}
	c, err := servers.LaunchClusterConfig(servers.ClusterConfig{Masters: clusterMasters, Replicas: 1,
		NodeTimeout: clusterNodeTimeout, Links: true})
	if err != nil {
		return err
	}
	d.state = c
	d.closers = append(d.closers, c.Close) // resumes paused nodes
	for _, n := range c.Nodes {
		d.nodes = append(d.nodes, node{addr: n.Addr(), proc: n})
	}
	return nil
}

// slotOwner returns the master of the lock's slot, as most nodes see it.
func (in *injector) slotOwner() (int, error) {
	return redisCluster(in.d).Owner(int(rediskeys.Slot(in.name)))
}

// clusterFailoverFault makes the master of the lock's slot fail: apply
// does it and lasts until the Cluster has promoted its replica; heal
// undoes it and lasts until the old master has rejoined as a replica of
// the new one, or ctx is done.
func (in *injector) clusterFailoverFault(ctx context.Context, kind string) (target string, apply, heal func() error, err error) {
	d, c := in.d, redisCluster(in.d)
	m := -1
	if err := waitFor(failoverBound, func() bool {
		var err error
		m, err = in.slotOwner()
		return err == nil && c.HasReplica(m)
	}); err != nil {
		return "", nil, nil, fmt.Errorf("no master of slot %d with a replica online: %w", rediskeys.Slot(in.name), err)
	}
	target = d.name(m) + ", the master of the lock's slot"
	r := c.Nodes[m]
	var do, undo func() error
	switch kind {
	case FaultMasterKill:
		// Back without its data (it keeps its nodes.conf): it learns that
		// its replica took over and follows it.
		do, undo = r.Kill, r.Restart
	case FaultMasterPause:
		do, undo = r.Pause, r.Resume
	case FaultMasterPartition:
		do = func() error { return c.Partition(m, true) }
		undo = func() error { return c.Partition(m, false) }
	}
	apply = func() error {
		start := time.Now()
		if err := do(); err != nil {
			return err
		}
		n := m
		if err := waitFor(failoverBound, func() bool {
			var err error
			n, err = in.slotOwner()
			return err == nil && n != m
		}); err != nil {
			return fmt.Errorf("chaos: the Cluster did not fail over from %s: %w", d.name(m), err)
		}
		in.hist.Add(Event{Op: OpLog, Value: fmt.Sprintf("failover: the Cluster promoted %s %v after the fault",
			d.name(n), time.Since(start).Round(time.Millisecond))})
		return nil
	}
	heal = func() error {
		if err := undo(); err != nil {
			return err
		}
		rejoined := func() bool { return ctx.Err() != nil || c.Replicating(m) }
		if err := waitFor(failoverBound, rejoined); err != nil {
			return fmt.Errorf("chaos: the old master %s did not rejoin as a replica: %w", d.name(m), err)
		}
		return nil
	}
	return target, apply, heal, nil
}

// migrate returns the migrate fault: the lock's slot, with the lock's
// keys and its fence counter, moves from its master to another, one key
// at a time, TTL/10 between steps.
func (in *injector) migrate() (target string, apply func() error, err error) {
	c := redisCluster(in.d)
	slot := int(rediskeys.Slot(in.name))
	from, err := in.slotOwner()
	if err != nil {
		return "", nil, err
	}
	// The other masters own the first slots of the ranges the masters
	// started with (only the lock's slot ever moves).
	var others []int
	for i := range clusterMasters {
		first := i * rediskeys.Slots / clusterMasters
		if o, err := c.Owner(first); err == nil && o != from && first != slot {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return "", nil, fmt.Errorf("no master other than %s", in.d.name(from))
	}
	to := others[in.rng.IntN(len(others))]
	target = fmt.Sprintf("slot %d, from %s to %s", slot, in.d.name(from), in.d.name(to))
	apply = func() error { return c.MigrateSlot(slot, to, in.ttl/10) }
	return target, apply, nil
}

// clusterVia maps the addresses the Cluster's nodes announce to client c's
// proxies to those nodes.
func clusterVia(d *deployment, c int) map[string]string {
	m := map[string]string{}
	for i, p := range d.proxies[c] {
		m[redisCluster(d).Announced(i)] = p.Addr()
	}
	return m
}

// injectMigrate plans FaultMigrate.
func injectMigrate(in *injector, ctx context.Context, f *injection) error {
	in.awaitHolder(ctx) // moving a free lock shows less
	var err error
	if f.target, f.apply, err = in.migrate(); err != nil {
		return fmt.Errorf("chaos: %s: %w", f.kind, err)
	}
	f.hold, f.heal = 0, func() error { return nil }
	return nil
}
