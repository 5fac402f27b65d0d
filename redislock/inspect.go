package redislock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// Inspect reports who holds the lock called name, for how long, its fence
// counter, and its waiters or permits, in one round trip. Info.Fence is
// the fence counter of the name's Cluster slot, which other names of the
// slot share: at least the holder's fence. Info.Waiters counts a
// FairMutex's queue, the writers waiting for an RWMutex, and the clients
// waiting for a Mutex or a ReentrantMutex (each Client once, however many
// of its goroutines wait; readers and semaphore waiters keep no place and are not counted).
// Holders
// have no Fence of their own, and at most 1000 of each mode are listed.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	if err := checkName(name); err != nil {
		return dlock.Info{}, err
	}
	if err := c.usable(); err != nil {
		return dlock.Info{}, err
	}
	k := keysFor(name)
	v, err := c.eval(ctx, redisscript.InspectOf(name).Call())
	if err != nil {
		return dlock.Info{}, describe(k.lock, redisscript.Inspect, err)
	}
	return redisscript.ParseInfo(name, v)
}

// ForceUnlock is an operator's override: it removes every holder of the
// lock called name (exclusive, reentrant, readers and writer, permits) and
// wakes waiters. Holders learn of it at their next renewal, when their
// leases end with dlock.ErrTakenOver. It reports whether anything was held.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if err := c.usable(); err != nil {
		return false, err
	}
	k := keysFor(name)
	v, err := c.eval(ctx, redisscript.ForceUnlockOf(name).Call())
	if err != nil {
		return false, describe(k.lock, redisscript.ForceUnlock, err)
	}
	n, _ := v.(int64)
	return n > 0, nil
}
