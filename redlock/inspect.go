package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// Inspect reports who holds the lock called name, asking every node at
// once. The lock is a dlock.KindMutex held by an owner only if a majority
// of the nodes has that owner's key; Info.TTL is then the least time left
// on those keys, and Info.Fence is the highest fence counter that a
// majority of the nodes holds (or passed): every grant's fence is held by a
// majority, so it is at least the latest granted (to a name of its Cluster
// slot, on a node that is a Cluster), and every later grant exceeds it. A
// single node's counter can be higher, raised by an attempt that failed
// or a vote the grant did not wait for. Keys on a minority (an attempt that failed, or a
// lease being released) make the lock dlock.KindUnknown, with Detail
// giving each node's view. It fails unless a majority answers.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	if err := rediskeys.CheckName("redlock", name); err != nil {
		return dlock.Info{}, err
	}
	if err := c.usable(); err != nil {
		return dlock.Info{}, err
	}
	call := redisscript.InspectOf(name).Call()
	replies := c.fanOut(ctx, call)
	views := make([]string, len(c.nodes))
	owners := map[string]int{}
	minTTL := map[string]time.Duration{}
	var errs []error
	fences := make([]uint64, len(c.nodes)) // 0 for a node that did not answer
	info := dlock.Info{Name: name, Kind: dlock.KindFree}
	for range c.nodes {
		r := <-replies
		n := c.nodes[r.node].name
		if r.res.Err != nil {
			errs = append(errs, &NodeError{Node: n, Err: r.res.Err})
			views[r.node] = n + ": " + r.res.Err.Error()
			continue
		}
		ni, err := redisscript.ParseInfo(name, r.res.Val)
		if err != nil {
			errs = append(errs, &NodeError{Node: n, Err: err})
			views[r.node] = n + ": " + err.Error()
			continue
		}
		fences[r.node] = ni.Fence
		views[r.node] = fmt.Sprintf("%s: %s", n, ni.Kind)
		if len(ni.Holders) > 0 {
			o := ni.Holders[0].Owner
			views[r.node] += fmt.Sprintf(" by %s, %v left", o, ni.TTL)
			owners[o]++
			if m, ok := minTTL[o]; !ok || ni.TTL < m {
				minTTL[o] = ni.TTL
			}
		}
	}
	if answered := len(c.nodes) - len(errs); answered < c.quorum {
		return dlock.Info{}, errQuorum("inspect", name, answered, c.quorum, len(c.nodes), errs)
	}
	info.Fence = redisscript.MajorityFence(fences)
	for o, votes := range owners {
		if votes >= c.quorum {
			info.Kind, info.TTL = dlock.KindMutex, minTTL[o]
			info.Holders = []dlock.Holder{{Owner: o, Label: lease.Label(o), Mode: dlock.ModeExclusive, Holds: 1}}
			return info, nil
		}
	}
	if len(owners) > 0 {
		info.Kind = dlock.KindUnknown
		info.Detail = "keys on a minority of the nodes (an attempt that failed, or a lease being released): " + strings.Join(views, "; ")
	}
	return info, nil
}

// ForceUnlock is an operator's override: it deletes the lock called name
// on every node, whoever holds it, wakes its waiters, and reports whether
// any node held it. It fails, with the NodeErrors, unless every node
// answered: a node it could not reach keeps its key until the key's TTL
// runs out. The holder learns at its next renewal, when its lease ends
// with an error matching dlock.ErrTakenOver.
//
// A renewal of the deposed lease that is under way does not put its key
// back: ForceUnlock records the tokens it deleted in the set
// dlock:{name}:deposed on every node, in a second round when it deleted
// any, and a renewal takes back no node for a token recorded there (see
// "Extending, losing and releasing" in docs/ARCHITECTURE.md). The second round
// also deletes the deposed keys that such a renewal set between the
// rounds. Each token is kept twice the longest time the deleted keys had
// left after ForceUnlock, and no longer, however often the name is
// forced (the set is sorted by the time until which each token is kept).
// When a node did not answer the second round,
// ForceUnlock returns an error that names it: a renewal under way may
// still set the deposed lease's key there, for at most the lease's TTL.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := rediskeys.CheckName("redlock", name); err != nil {
		return false, err
	}
	if err := c.usable(); err != nil {
		return false, err
	}
	k := rediskeys.For(name)
	deposedKey := k.Base + deposedSuffix
	replies := c.fanOut(ctx, redisscript.QuorumForceCall{Lock: k.Base, Deposed: deposedKey, Channel: k.Channel}.Call())
	held := false
	var deposed []string // the tokens deleted, on any node
	var life int64       // how long the set of deposed tokens lives, in ms
	var errs []error
	for range c.nodes {
		r := <-replies
		token, pttl, deleted, err := forced(r.res)
		if err != nil {
			errs = append(errs, &NodeError{Node: c.nodes[r.node].name, Err: err})
			continue
		}
		held = held || deleted
		if pttl > 0 && !slices.Contains(deposed, token) {
			deposed = append(deposed, token)
		}
		life = max(life, 2*pttl)
	}
	if len(errs) > 0 {
		err := fmt.Errorf("redlock: force unlock of %q reached %d of %d nodes; the others keep their keys until the TTL runs out: %w",
			name, len(c.nodes)-len(errs), len(c.nodes), errors.Join(errs...))
		if len(deposed) > 0 {
			c.depose(ctx, k.Base, deposedKey, life, deposed) // as far as it goes
		}
		return held, err
	}
	if len(deposed) == 0 {
		return held, nil
	}
	if errs := c.depose(ctx, k.Base, deposedKey, life, deposed); len(errs) > 0 {
		return held, fmt.Errorf("redlock: force unlock of %q deleted the lock, but %d of %d nodes did not confirm that they refuse the deposed lease: a renewal under way may set its key there again, for at most its TTL: %w",
			name, len(errs), len(c.nodes), errors.Join(errs...))
	}
	return held, nil
}

// deposedSuffix ends the key, beside the lock's, of the sorted set of
// tokens that ForceUnlock deposed (see quorum_force.lua).
const deposedSuffix = ":deposed"

// depose runs ForceUnlock's second round: every node records each of the
// deposed tokens for life ms in deposedKey, and deletes its key, lock, if
// it holds one of them. It returns the errors of the nodes that did not
// confirm.
func (c *Client) depose(ctx context.Context, lock, deposedKey string, life int64, deposed []string) []error {
	replies := c.fanOut(ctx, redisscript.QuorumDeposeCall{Lock: lock, Deposed: deposedKey, LifeMillis: life, Tokens: deposed}.Call())
	var errs []error
	for range c.nodes {
		if r := <-replies; r.res.Err != nil {
			errs = append(errs, &NodeError{Node: c.nodes[r.node].name, Err: r.res.Err})
		}
	}
	return errs
}

// forced reads a node's reply to quorum_force.lua.
func forced(res redisconn.Result) (token string, pttl int64, deleted bool, err error) {
	if res.Err != nil {
		return "", 0, false, res.Err
	}
	a, ok := res.Val.([]any)
	if len(a) == 3 {
		token, _ = a[1].(string)
		pttl, _ = a[2].(int64)
		deleted = a[0] == int64(1)
	}
	if !ok || len(a) != 3 {
		return "", 0, false, fmt.Errorf("quorum_force: unexpected reply %v", res.Val)
	}
	return token, pttl, deleted, nil
}
