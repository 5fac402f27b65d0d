package backend

import (
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
)

// Redlock: three or more --redis URLs, independent masters, redlock.
// Inspect shows each master's view beside the majority's; release counts
// the masters' keys it removed.
var _ = register(&driver{
	name: "redlock", title: "Redlock", order: 2,
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.DurationVar(&f.RestartWindow, "restart-window", 0, "Redlock: how long a node whose server restarted sits out (redlock.WithRestartWindow); every client of the nodes must use the same; default 30s (dlock run: or its --ttl, if longer)")
	},
	claims:    func(s Spec) bool { return len(s.Redis) > 1 },
	describe:  describeRedis,
	checkName: checkRedisName,
	checkKind: func(s Spec, kind string) error {
		return cmdutil.Usagef("--kind %s is not available with Redlock (%d Redis URLs); Redlock has only --kind mutex", kind, len(s.Redis))
	},
	nodes:       redisNodes,
	connect:     connectRedlock,
	oncePer:     true,
	removed:     "master's key",
	removedMany: "masters' keys",
	fenceNote:   "latest granted to a name of this slot; the holder's is at most that",
	waiters:     waitersNone,
})

// redlockConn is a Redlock client of the masters, and a redislock client
// of each, to inspect and release them one by one.
type redlockConn struct {
	redisServers
	nodes  []*redislock.Client
	quorum *redlock.Client
}

func connectRedlock(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	s, conns, errs, err := dialRedis(ctx, spec)
	if err != nil {
		return nil, err
	}
	if len(errs) > len(spec.Redis)/2 {
		s.closeAll()
		return nil, fmt.Errorf("only %d of %d Redis masters answer; Redlock needs a majority: %w",
			len(spec.Redis)-len(errs), len(spec.Redis), joinErrs(errs))
	}
	r := &redlockConn{redisServers: s}
	for _, c := range conns {
		r.nodes = append(r.nodes, redislock.New(c))
	}
	// A node sits out the window after a restart: at least as long as
	// the longest lease it may have granted.
	window := spec.RestartWindow
	if window == 0 {
		window = redlock.DefaultRestartWindow
	}
	opts := []redlock.ClientOption{redlock.WithObserver(obs), redlock.WithRestartWindow(max(window, spec.LongestTTL)),
		redlock.WithNodeTimeout(NodeTimeout(spec.LongestTTL))}
	r.quorum = redlock.New(conns, opts...)
	return r, nil
}

func (r *redlockConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	return r.quorum.NewMutex(name, redlock.WithTTL(o.TTL), redlock.WithMaxHold(o.MaxHold)), nil
}

func (r *redlockConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	return r.quorum.NewElection(name, redlock.WithTTL(ttl)), nil
}

func (r *redlockConn) admin(name string) (dlock.Admin, string, string) { return r.quorum, name, "" }

func (r *redlockConn) close() {
	r.quorum.Close()
	for _, n := range r.nodes {
		n.Close()
	}
	r.closeAll()
}

// inspect asks every master at once, and sums their views up
// (majorityView); a majority must answer.
func (r *redlockConn) inspect(ctx context.Context, name string, rep *Report) error {
	var ok []dlock.Info
	var errs []error
	infos := make([]dlock.Info, len(r.nodes))
	failed := make([]error, len(r.nodes))
	eachNode(ctx, len(r.nodes), NodeTimeout(0), func(ctx context.Context, i int) {
		infos[i], failed[i] = r.nodes[i].Inspect(ctx, name)
	})
	for i, info := range infos {
		n := NodeReport{Addr: r.addrs[i]}
		if err := failed[i]; err != nil {
			n.Error, errs = err.Error(), append(errs, fmt.Errorf("%s: %w", n.Addr, err))
		} else {
			n.Kind, n.Fence, n.TTLms = string(info.Kind), info.Fence, info.TTL.Milliseconds()
			if len(info.Holders) > 0 {
				n.Holder = info.Holders[0].Owner
			}
			ok = append(ok, info)
		}
		rep.Nodes = append(rep.Nodes, n)
	}
	if len(ok) <= len(r.nodes)/2 {
		return fmt.Errorf("only %d of %d Redlock masters answered: %w", len(ok), len(r.nodes), joinErrs(errs))
	}
	majorityView(rep)
	return nil
}

// forceRelease counts the masters that hold a key, for the report, then
// removes them with redlock's ForceUnlock, which also keeps a renewal
// under way from taking a master back (its deposed set).
func (r *redlockConn) forceRelease(ctx context.Context, name string) (int, error) {
	var holding atomic.Int32
	eachNode(ctx, len(r.nodes), NodeTimeout(0), func(ctx context.Context, i int) {
		if info, err := r.nodes[i].Inspect(ctx, name); err == nil && len(info.Holders) > 0 {
			holding.Add(1)
		}
	})
	n := int(holding.Load())
	held, err := r.quorum.ForceUnlock(ctx, name)
	if held {
		n = max(n, 1)
	}
	if err != nil {
		return n, fmt.Errorf("not released on every master; a master that did not answer keeps the lock until its TTL runs out: %w", err)
	}
	return n, nil
}

// majorityView sums up a Redlock lock: held by an owner only if a majority
// of masters has that owner's key; the fence is the highest counter a
// majority reaches (redisscript.MajorityFence).
func majorityView(r *Report) {
	votes := map[string]int{}
	var ttls = map[string]int64{}
	r.Holders = []ReportHolder{}
	r.Kind = string(dlock.KindFree)
	fences := make([]uint64, len(r.Nodes))
	for i, n := range r.Nodes {
		fences[i] = n.Fence
		if n.Holder != "" {
			votes[n.Holder]++
			if ttls[n.Holder] == 0 || n.TTLms < ttls[n.Holder] {
				ttls[n.Holder] = n.TTLms
			}
		}
	}
	r.Fence = redisscript.MajorityFence(fences)
	for owner, v := range votes {
		if v > len(r.Nodes)/2 {
			r.Kind, r.Held, r.TTLms = string(dlock.KindMutex), true, ttls[owner]
			r.Holders = append(r.Holders, ReportHolder{Owner: owner, Label: lease.Label(owner), Holds: 1, Mode: dlock.ModeExclusive})
		} else if r.Kind == string(dlock.KindFree) {
			r.Kind = "split" // keys on a minority: a failed or expiring attempt
		}
	}
}

// NodeTimeout is how long the command's Redlock client waits for one
// master in one operation: a twentieth of the TTL, from redlock's default
// (50ms) up to 1s. A command is not latency-bound, and on a loaded host a
// process stalls for longer than 50ms, which cost the votes of the nodes
// that answered in the stall.
func NodeTimeout(ttl time.Duration) time.Duration {
	if ttl == 0 { // inspect, release: no lease to keep valid
		return time.Second
	}
	return min(max(ttl/20, redlock.DefaultNodeTimeout), time.Second)
}
