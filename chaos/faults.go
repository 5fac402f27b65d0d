package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/internal/servers"
)

// An injector applies faults to a deployment and its clients, recording
// each in the history with its target, from the moment it begins to the
// moment it is healed.
type injector struct {
	d       *deployment
	hist    *History
	rng     *rand.Rand
	ttl     time.Duration
	session time.Duration // ZooKeeper session timeout; 0 for Redis
	name    string        // the lock's name
	clients []*clientProc
	holder  func() int // the client holding the lock now (0-based), or -1
}

// outlast is how long a holder fault lasts: past the TTL and, on
// ZooKeeper, past the session timeout, so that the lock does move on.
func (in *injector) outlast() time.Duration {
	return max(in.ttl, in.session)*3/2 + in.between(0, in.ttl/2)
}

// between returns a random duration in [lo, hi].
func (in *injector) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(in.rng.Int64N(int64(hi-lo)+1))
}

// inject applies fault kind, holds it, heals it and records both ends.
// It heals even when ctx is done while the fault holds.
func (in *injector) inject(ctx context.Context, kind string) error {
	node := in.rng.IntN(in.d.servers())
	target := in.d.name(node)
	hold := in.between(in.ttl/2, 2*in.ttl)
	var apply, heal func() error
	switch kind {
	case FaultKill, FaultKillEmpty:
		// Often back before the holder's lease runs out: the case that
		// tells whether a restarted server forgets a held lock.
		hold = in.between(in.ttl/10, in.ttl)
		s := in.d.server(node)
		apply = s.Kill
		heal = s.Restart
		if kind == FaultKillEmpty {
			heal = func() error { return in.d.restartEmpty(node) }
		}
	case FaultKillEmptyAll:
		if in.d.zk == nil {
			return fmt.Errorf("chaos: %s is a ZooKeeper fault", kind)
		}
		target = "every node"
		hold = in.between(in.ttl/10, in.ttl)
		in.awaitHolder(ctx) // an ensemble that forgets a free lock shows nothing
		apply = func() error {
			var errs []error
			for _, z := range in.d.zk.Servers {
				errs = append(errs, z.Kill())
			}
			return errors.Join(errs...)
		}
		heal = in.d.zk.RestartEmpty
	case FaultTerminate:
		if in.d.pg == nil && in.d.my == nil {
			return fmt.Errorf("chaos: %s is a PostgreSQL and MariaDB fault", kind)
		}
		hold = 0
		in.awaitHolder(ctx)
		c := in.victim()
		target = fmt.Sprintf("client %d", c+1)
		apply = func() error {
			terminate := in.d.terminate
			if in.d.my != nil {
				terminate = in.d.killConnections
			}
			n, err := terminate(c)
			in.hist.Add(Event{Op: OpLog, Value: fmt.Sprintf("terminate: %d sessions of client %d ended", n, c+1)})
			return err
		}
		heal = func() error { return nil }
	case FaultMasterKill, FaultMasterPause, FaultMasterPartition:
		failover := in.failoverFault
		switch {
		case in.d.cluster != nil:
			failover = in.clusterFailoverFault
		case in.d.links == nil:
			return fmt.Errorf("chaos: %s is a Sentinel or Cluster fault", kind)
		}
		var err error
		if target, apply, heal, err = failover(ctx, kind); err != nil {
			return fmt.Errorf("chaos: %s: %w", kind, err)
		}
		// apply lasts until a replica is promoted; the old master stays
		// out a little longer, while the clients move on.
		hold = in.between(0, in.ttl)
	case FaultReplicationCut:
		if in.d.links == nil {
			return fmt.Errorf("chaos: %s is a Sentinel fault", kind)
		}
		var err error
		if target, apply, heal, err = in.replicationCut(ctx); err != nil {
			return fmt.Errorf("chaos: %s: %w", kind, err)
		}
		hold = in.between(in.ttl, 3*in.ttl)
	case FaultMigrate:
		if in.d.cluster == nil {
			return fmt.Errorf("chaos: %s is a Cluster fault", kind)
		}
		in.awaitHolder(ctx) // moving a free lock shows less
		var err error
		if target, apply, err = in.migrate(); err != nil {
			return fmt.Errorf("chaos: %s: %w", kind, err)
		}
		hold, heal = 0, func() error { return nil }
	case FaultLeaderKill:
		i, err := in.d.leader()
		if err != nil {
			return err
		}
		node, target = i, in.d.name(i)+", the leader"
		s := in.d.server(i)
		apply, heal = s.Kill, s.Restart
	case FaultLeaderPauseKill:
		if in.d.etcd == nil {
			return fmt.Errorf("chaos: %s is an etcd fault", kind)
		}
		in.awaitHolder(ctx)
		c := in.victim()
		i, err := in.d.leader()
		if err != nil {
			return err
		}
		node, target = i, fmt.Sprintf("%s, the leader, with client %d pinned to it", in.d.name(i), c+1)
		hold = in.between(0, in.ttl)
		apply, heal = in.pauseKill(ctx, c, i)
	case FaultPause:
		s := in.d.server(node)
		apply, heal = s.Pause, s.Resume
	case FaultLatency:
		lat := in.between(in.ttl/20, in.ttl/5)
		target = fmt.Sprintf("%s, +%v each way", target, lat)
		hold = in.between(in.ttl, 3*in.ttl)
		apply = each(in.d.serverProxies(node), func(p *servers.Proxy) { p.SetLatency(lat) })
		heal = each(in.d.serverProxies(node), func(p *servers.Proxy) { p.SetLatency(0) })
	case FaultBlackhole:
		apply = each(in.d.serverProxies(node), func(p *servers.Proxy) { p.Blackhole(true) })
		heal = each(in.d.serverProxies(node), unblackhole)
	case FaultReset:
		hold = 0
		apply = each(in.d.serverProxies(node), (*servers.Proxy).Reset)
		heal = func() error { return nil }
	case FaultExpire:
		hold = 0
		in.awaitHolder(ctx) // expiring a free lock shows nothing
		var value string
		var on int
		node, value, on, kind = in.expiryTarget(node)
		target = in.d.name(node)
		if n := in.d.servers(); n > 1 {
			target += fmt.Sprintf(", the key on %d of %d nodes", on, n)
		}
		apply = func() error {
			expired, err := in.d.expire(node, in.name, value)
			if err == nil && !expired {
				in.hist.Add(Event{Op: OpLog, Value: "expire: the key changed before it could expire; nothing done"})
			}
			return err
		}
		heal = func() error { return nil }
	case FaultClientPause:
		in.awaitHolder(ctx)
		c := in.victim()
		target, hold = fmt.Sprintf("client %d", c+1), in.outlast()
		p := in.clients[c]
		apply = func() error { return p.signal(syscall.SIGSTOP) }
		heal = func() error { return p.signal(syscall.SIGCONT) }
	case FaultPartition, FaultSession:
		in.awaitHolder(ctx)
		c := in.victim()
		target, hold = fmt.Sprintf("client %d", c+1), in.outlast()
		apply = each(in.d.proxies[c], func(p *servers.Proxy) { p.Blackhole(true) })
		heal = each(in.d.proxies[c], unblackhole)
	default:
		return fmt.Errorf("chaos: unknown fault %q", kind)
	}
	in.hist.Add(Event{Op: OpFault, Fault: kind, Target: target})
	err := apply()
	if err == nil {
		sleep(ctx, hold)
	}
	herr := heal()
	in.hist.Add(Event{Op: OpHeal, Fault: kind, Target: target})
	if err != nil {
		return fmt.Errorf("chaos: %s %s: %w", kind, target, err)
	}
	if herr != nil {
		return fmt.Errorf("chaos: healing %s %s: %w", kind, target, herr)
	}
	return nil
}

// pauseKill returns FaultLeaderPauseKill's apply and heal for client c
// and leader i. apply pins c to the leader (its proxies to the other
// members refuse and reset connections, so its client has only the
// leader's endpoint), waits up to a renewal period so that the pause falls
// anywhere in it, pauses the leader for half a TTL but at least 2s (past
// an election, and past a renewal sent to it), resumes it and kills it
// 10ms later: a leader that answers a queued renewal from its own lease
// table before it learns that it was deposed, and is then gone. heal
// restarts it and unpins c.
func (in *injector) pauseKill(ctx context.Context, c, i int) (apply, heal func() error) {
	s := in.d.server(i)
	var others []*servers.Proxy
	for j, p := range in.d.proxies[c] {
		if j != i {
			others = append(others, p)
		}
	}
	apply = func() error {
		for _, p := range others {
			p.SetRefuse(true)
			p.Reset()
		}
		sleep(ctx, in.between(0, in.ttl/3))
		if err := s.Pause(); err != nil {
			return err
		}
		sleep(context.WithoutCancel(ctx), max(in.ttl/2, 2*time.Second))
		if err := s.Resume(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		return s.Kill()
	}
	heal = func() error {
		err := s.Restart() // resumes it first if apply stopped between
		for _, p := range others {
			p.SetRefuse(false)
		}
		return err
	}
	return apply, heal
}

// expiryTarget picks the server whose lock key an expire fault makes
// expire: one that holds the key, else node. It returns the key's value
// there, on how many servers the key has that value, and the kind to
// record: FaultExpireBare on Redlock when the key stood on no more than a
// majority of the nodes, so that what is left after the expiry is less
// than a majority.
func (in *injector) expiryTarget(node int) (int, string, int, string) {
	vs := in.d.lockValues(in.name)
	var held []int
	for i, v := range vs {
		if v != "" {
			held = append(held, i)
		}
	}
	if len(held) > 0 {
		node = held[in.rng.IntN(len(held))]
	}
	value, kind := vs[node], FaultExpire
	on := 0
	if value != "" {
		on = count(vs, value)
	}
	if n := len(vs); n > 1 && on > 0 && on <= n/2+1 {
		kind = FaultExpireBare
	}
	return node, value, on, kind
}

// count returns how many of vs are v.
func count(vs []string, v string) int {
	n := 0
	for _, x := range vs {
		if x == v {
			n++
		}
	}
	return n
}

// awaitHolder waits up to a TTL for a client to hold the lock.
func (in *injector) awaitHolder(ctx context.Context) {
	for deadline := time.Now().Add(in.ttl); in.holder() < 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		sleep(ctx, time.Millisecond)
	}
}

// victim returns the client holding the lock, or a random one.
func (in *injector) victim() int {
	if c := in.holder(); c >= 0 {
		return c
	}
	return in.rng.IntN(len(in.clients))
}

// unblackhole ends p's blackhole and resets every connection that went
// through it. The proxy drops what it reads while blackholed, so a
// connection that outlived the blackhole would carry a stream with a hole
// in it, which no network makes: TCP retransmits what was lost, or the
// connection breaks. Left open, such streams were read as garbage: on
// etcd, every request of a client on its HTTP/2 connection to the member
// failed with PROTOCOL_ERROR or "malformed method name", for as long as
// the connection lasted (seconds, until a reset fault or a timeout),
// which was measured as slow recovery from the faults that followed.
// Resetting them is what the proxy's Cut does when it ends.
func unblackhole(p *servers.Proxy) {
	p.Blackhole(false)
	p.Reset()
}

func each(ps []*servers.Proxy, f func(*servers.Proxy)) func() error {
	return func() error {
		for _, p := range ps {
			f(p)
		}
		return nil
	}
}

// A schedule picks the next fault.
type schedule struct {
	faults []string
	random bool
	rng    *rand.Rand
	next   int
}

func (s *schedule) pick() string {
	if s.random {
		return s.faults[s.rng.IntN(len(s.faults))]
	}
	f := s.faults[s.next%len(s.faults)]
	s.next++
	return f
}

// checkFaults checks that every fault applies to backend.
func checkFaults(backend string, faults []string) error {
	valid := FaultsFor(backend)
	for _, f := range faults {
		if !slices.Contains(valid, f) {
			return fmt.Errorf("chaos: fault %q does not apply to %s; use some of %v", f, backend, valid)
		}
	}
	return nil
}
