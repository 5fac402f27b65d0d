package redlock

import (
	"context"
	"sync"

	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// A lease stands on a bare majority when a competitor's failed attempt
// held the other nodes at its grant: that attempt deletes its keys in the
// background, but the freed nodes stay free, and one node that loses the
// key (a forward jump of its clock, DEL, eviction) then lets another
// client in while the lease is valid. So once a majority has extended a
// lease, the nodes that answered that its key is absent are taken back,
// with the lease's token and TTL, by a script that sets the key only if it
// is absent (quorum_retake.lua). A retake never counts as an extension,
// and a lease that no majority extended is not retaken: keys that an
// operator deleted on a majority stay deleted, and the lease ends with
// dlock.ErrTakenOver. An operator's ForceUnlock, which may run while a
// renewal that a majority extended is under way, is ordered with the
// retake on the nodes: the retake script sets no key for a token that
// ForceUnlock recorded as deposed (see quorum_force.lua and
// quorum_depose.lua).
//
// A retake must not land after the lease's keys were deleted by its
// Release (or by Close, which releases the leases still held) or by the
// clean-up of a lease that reached its maximum hold. That is ordered by
// the grant's retakeMu, which a retake holds from its check that the lease
// is neither being released nor ended until its calls have returned:
//
//   - Release marks the lease as being released (BeginRelease) before it
//     takes retakeMu, and sends its deletes only after. A retake that took
//     retakeMu first has returned by then, and its key is deleted like the
//     others; one that takes it later sees the release and sends nothing.
//   - A lease that reached its maximum hold has ended before forget starts
//     its clean-up, and the clean-up takes retakeMu before its first look:
//     a retake under way has returned by then, and a later one sees the
//     end and sends nothing.
//   - A retake call that failed without a reply may still run later on
//     its node (a request buffered on a slow connection), as a timed-out
//     acquire may: the node is recorded in retook, and the release or
//     clean-up treats it as a node whose acquire may still land, looking
//     there again over lateLooks.
//
// A lease that expires, or is lost, keeps no promise about its keys: they
// expire within the TTL, and so does a key a retake under way sets.

// retakeState is a grant's part in retaking nodes.
type retakeState struct {
	retakeMu sync.Mutex
	// retook, under retakeMu: by node, a retake whose call failed without
	// a reply, so that its key may still be set late. nil until one does.
	retook []bool
}

// mayLandLate returns, by node, the retakes that may still set the key
// late, after waiting for a retake under way. The caller has made sure
// that no retake starts after (the lease is being released, or ended).
func (g *grant) mayLandLate() []bool {
	g.retakeMu.Lock()
	defer g.retakeMu.Unlock()
	return g.retook
}

// A retakeJob is one lease to retake on the nodes in absent.
type retakeJob struct {
	g      *grant
	absent []bool // by node
}

// retake sets each job's key on the nodes where it was absent, one
// pipelined call per node for all the jobs, all nodes in parallel, each
// bounded by the node timeout. The caller has seen a majority extend each
// job's lease. A lease that is being released or has ended is skipped,
// and so is one whose retake is already under way (a Refresh beside the
// watchdog). It returns the number of keys set.
func (c *Client) retake(ctx context.Context, jobs []retakeJob) int {
	held := jobs[:0]
	for _, j := range jobs {
		if !j.g.retakeMu.TryLock() {
			continue
		}
		if j.g.Releasing() || j.g.Err() != nil {
			j.g.retakeMu.Unlock()
			continue
		}
		held = append(held, j)
	}
	defer func() {
		for _, j := range held {
			j.g.retakeMu.Unlock()
		}
	}()
	if len(held) == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.nodeTimeout)
	defer cancel()
	type nodeCalls struct {
		jobs    []int // into held
		calls   []redisconn.Call
		results []redisconn.Result
	}
	per := make([]nodeCalls, len(c.nodes))
	for k, j := range held {
		for i, a := range j.absent {
			if a {
				per[i].jobs = append(per[i].jobs, k)
				per[i].calls = append(per[i].calls, redisscript.RefreshCall{Lock: j.g.m.keys.lock, Token: j.g.Token(), TTL: j.g.m.ttl,
					Deposed: j.g.m.keys.deposed}.Call(redisscript.QuorumRetake))
			}
		}
	}
	var wg sync.WaitGroup
	for i := range per {
		p := &per[i]
		if len(p.calls) == 0 {
			continue
		}
		p.results = make([]redisconn.Result, len(p.calls))
		wg.Add(1)
		c.workers.run(func() {
			defer wg.Done()
			c.nodes[i].conn.Eval(ctx, p.calls, p.results)
		})
	}
	wg.Wait()
	set := 0
	for i, p := range per {
		for n, r := range p.results {
			g := held[p.jobs[n]].g
			switch {
			case r.Err == nil && positive(r.Val):
				set++
			case r.Err != nil && !redisscript.IsReply(r.Err) && !redisscript.Unsent(r.Err):
				if g.retook == nil {
					g.retook = make([]bool, len(c.nodes))
				}
				g.retook[i] = true
			}
		}
	}
	return set
}
