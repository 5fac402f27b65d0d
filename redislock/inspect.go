package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/internal/redisscript"
)

// A Holder is one owner of a lock and how many holds it has (more than one
// only for a ReentrantMutex).
type Holder struct {
	// Owner is the holder's token; for a ReentrantMutex, the SHA-1 of
	// the owner's token in hex, since the token itself would let whoever
	// reads it join the hold (see NewReentrantMutex).
	Owner string
	Holds int
}

// Info describes one lock name, whatever kind of lock uses it.
type Info struct {
	Name string
	// Kind is "free", "exclusive" (Mutex or FairMutex), "reentrant",
	// "read-write" or "semaphore", or the Redis type found at the lock key
	// if it is none of dlock's.
	Kind    string
	Holders []Holder      // the exclusive or reentrant holder(s)
	TTL     time.Duration // time left on the lock key; 0 when none
	Fence   uint64        // the fence counter of the name's Cluster slot: the latest fence granted to any name of the slot, so at least the holder's
	Queue   int           // waiters queued for a FairMutex, or writers waiting for an RWMutex
	Writer  string        // an RWMutex's writer
	Readers int           // an RWMutex's live readers
	// PermitsInUse and PermitLimit describe a Semaphore.
	PermitsInUse, PermitLimit int
}

// Inspect reports who holds the lock called name, for how long, its fence
// counter, and its waiters or permits, in one round trip.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	if err := c.usable(); err != nil {
		return Info{}, err
	}
	k := keysFor(name)
	v, err := c.eval(ctx, redisscript.Inspect, []string{k.lock, k.fence, k.lock + ":queue",
		k.lock + ":permits", k.lock + ":limit", k.lock + ":writer", k.lock + ":readers", k.lock + ":wintent"})
	if err != nil {
		return Info{}, describe(k.lock, redisscript.Inspect, err)
	}
	return parseInfo(name, v)
}

func parseInfo(name string, v any) (Info, error) {
	a, ok := v.([]any)
	if !ok || len(a) < 9 || len(a)%2 == 0 {
		return Info{}, fmt.Errorf("redislock: inspect %q: unexpected reply %v", name, v)
	}
	str := func(i int) string { s, _ := a[i].(string); return s }
	num := func(i int) int64 {
		switch x := a[i].(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	info := Info{Name: name, Queue: int(num(3)), PermitsInUse: int(num(4)), PermitLimit: int(num(5)),
		Writer: str(6), Readers: int(num(8))}
	info.Fence, _ = strconv.ParseUint(str(2), 10, 64)
	if pttl := num(1); pttl > 0 {
		info.TTL = time.Duration(pttl) * time.Millisecond
	}
	if info.Writer != "" && num(7) > 0 {
		info.TTL = time.Duration(num(7)) * time.Millisecond
	}
	for i := 9; i+1 < len(a); i += 2 {
		info.Holders = append(info.Holders, Holder{Owner: str(i), Holds: int(num(i + 1))})
	}
	switch lock := str(0); lock {
	case "Mutex", "FairMutex":
		info.Kind = "exclusive"
	case "ReentrantMutex":
		info.Kind = "reentrant"
	case "RWMutex":
		info.Kind = "read-write"
	case "Semaphore":
		info.Kind = "semaphore"
	case "":
		switch {
		case info.Writer != "" || info.Readers > 0:
			info.Kind = "read-write"
		case info.PermitsInUse > 0:
			info.Kind = "semaphore"
		default:
			info.Kind = "free"
		}
	default:
		info.Kind = lock
	}
	if info.Kind == "read-write" || info.Kind == "semaphore" {
		info.TTL = 0 // the marker's, not a holder's
		if info.Writer != "" && num(7) > 0 {
			info.TTL = time.Duration(num(7)) * time.Millisecond
		}
	}
	return info, nil
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
	v, err := c.eval(ctx, redisscript.ForceUnlock, []string{k.lock, k.lock + ":writer", k.lock + ":readers",
		k.lock + ":wintent", k.lock + ":permits", k.lock + ":queue"}, k.channel, k.lock+":w:")
	if err != nil {
		return false, describe(k.lock, redisscript.ForceUnlock, err)
	}
	n, _ := v.(int64)
	return n > 0, nil
}
