package chaos

import (
	"context"
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

// An injection is one fault, as inject plans it: on node (for the node
// faults), recorded as kind on target, applied, held for hold, and healed.
type injection struct {
	kind, target string
	node         int
	hold         time.Duration
	apply, heal  func() error
}

// inject applies fault kind, holds it, heals it and records both ends.
// It heals even when ctx is done while the fault holds.
func (in *injector) inject(ctx context.Context, kind string) error {
	node := in.rng.IntN(in.d.servers())
	f := &injection{kind: kind, node: node, target: in.d.name(node), hold: in.between(in.ttl/2, 2*in.ttl)}
	if err := in.plan(ctx, f); err != nil {
		return err
	}
	kind, target := f.kind, f.target
	in.hist.Add(Event{Op: OpFault, Fault: kind, Target: target})
	err := f.apply()
	if err == nil {
		sleep(ctx, f.hold)
	}
	herr := f.heal()
	in.hist.Add(Event{Op: OpHeal, Fault: kind, Target: target})
	if err != nil {
		return fmt.Errorf("chaos: %s %s: %w", kind, target, err)
	}
	if herr != nil {
		return fmt.Errorf("chaos: healing %s %s: %w", kind, target, herr)
	}
	return nil
}

// plan plans f: the service's own way if it has one for f.kind, else the
// same way on every backend.
func (in *injector) plan(ctx context.Context, f *injection) error {
	svc := in.d.svc
	if own := svc.injects[f.kind]; own != nil {
		return own(in, ctx, f)
	}
	switch f.kind {
	case FaultKill, FaultKillEmpty:
		// Often back before the holder's lease runs out: the case that
		// tells whether a restarted server forgets a held lock.
		f.hold = in.between(in.ttl/10, in.ttl)
		s, node := in.d.server(f.node), f.node
		f.apply, f.heal = s.Kill, s.Restart
		if f.kind == FaultKillEmpty {
			if svc.restartEmpty == nil {
				return in.notFor(f.kind)
			}
			f.heal = func() error { return svc.restartEmpty(in.d, node) }
		}
	case FaultLeaderKill:
		if svc.leader == nil {
			return in.notFor(f.kind)
		}
		i, err := svc.leader(in.d)
		if err != nil {
			return err
		}
		f.node, f.target = i, in.d.name(i)+", the leader"
		s := in.d.server(i)
		f.apply, f.heal = s.Kill, s.Restart
	case FaultPause:
		s := in.d.server(f.node)
		f.apply, f.heal = s.Pause, s.Resume
	case FaultLatency:
		lat := in.between(in.ttl/20, in.ttl/5)
		f.target = fmt.Sprintf("%s, +%v each way", f.target, lat)
		f.hold = in.between(in.ttl, 3*in.ttl)
		f.apply = each(in.d.serverProxies(f.node), func(p *servers.Proxy) { p.SetLatency(lat) })
		f.heal = each(in.d.serverProxies(f.node), func(p *servers.Proxy) { p.SetLatency(0) })
	case FaultBlackhole:
		f.apply = each(in.d.serverProxies(f.node), func(p *servers.Proxy) { p.Blackhole(true) })
		f.heal = each(in.d.serverProxies(f.node), unblackhole)
	case FaultReset:
		f.hold = 0
		f.apply = each(in.d.serverProxies(f.node), (*servers.Proxy).Reset)
		f.heal = func() error { return nil }
	case FaultClientPause:
		in.awaitHolder(ctx)
		c := in.victim()
		f.target, f.hold = fmt.Sprintf("client %d", c+1), in.outlast()
		p := in.clients[c]
		f.apply = func() error { return p.signal(syscall.SIGSTOP) }
		f.heal = func() error { return p.signal(syscall.SIGCONT) }
	case FaultPartition, FaultSession:
		in.awaitHolder(ctx)
		c := in.victim()
		f.target, f.hold = fmt.Sprintf("client %d", c+1), in.outlast()
		f.apply = each(in.d.proxies[c], func(p *servers.Proxy) { p.Blackhole(true) })
		f.heal = each(in.d.proxies[c], unblackhole)
	default:
		for _, s := range services {
			if s.injects[f.kind] != nil {
				return in.notFor(f.kind)
			}
		}
		return fmt.Errorf("chaos: unknown fault %q", f.kind)
	}
	return nil
}

// notFor is the error for fault kind, which does not apply to the
// deployment's backend.
func (in *injector) notFor(kind string) error {
	return fmt.Errorf("chaos: fault %q does not apply to %s", kind, in.d.backend)
}

// injectTerminate plans FaultTerminate with terminate, which ends every
// session of client c (0-based) and returns how many it ended.
func injectTerminate(terminate func(d *deployment, c int) (int, error)) injectFunc {
	return func(in *injector, ctx context.Context, f *injection) error {
		f.hold = 0
		in.awaitHolder(ctx)
		c := in.victim()
		f.target = fmt.Sprintf("client %d", c+1)
		f.apply = func() error {
			n, err := terminate(in.d, c)
			in.hist.Add(Event{Op: OpLog, Value: fmt.Sprintf("terminate: %d sessions of client %d ended", n, c+1)})
			return err
		}
		f.heal = func() error { return nil }
		return nil
	}
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
