package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/redislock"
)

// A Report describes one lock, whatever the backend.
type Report struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`          // "redis", "redlock" or "zookeeper"
	Where   string `json:"where"`            // addresses, or the ZooKeeper path
	Kind    string `json:"kind"`             // "free", "exclusive", "reentrant", "read-write", "semaphore", ...
	Held    bool   `json:"held"`             // anyone holds it
	Fence   uint64 `json:"fence,omitempty"`  // the latest fence granted (Redis: to any name of the name's Cluster slot)
	TTLms   int64  `json:"ttl_ms,omitempty"` // time left on the lease (Redis)

	Holders      []ReportHolder `json:"holders"`
	Waiters      int            `json:"waiters"`
	Readers      int            `json:"readers,omitempty"`
	PermitsInUse int            `json:"permits_in_use,omitempty"`
	PermitLimit  int            `json:"permit_limit,omitempty"`
	// Nodes is each Redlock master's own view.
	Nodes []NodeReport `json:"nodes,omitempty"`
	// Unknown lists children of a ZooKeeper path that no dlock recipe made.
	Unknown []string `json:"unknown,omitempty"`
	// Forced is the note of the last "dlock release --force" of the
	// lock, for a day (Redis): who removed how many holders, and when.
	Forced string `json:"forced,omitempty"`
}

// A ReportHolder is one holder of a lock.
type ReportHolder struct {
	Owner   string `json:"owner"`             // the holder's token
	Holds   int    `json:"holds,omitempty"`   // hold count (reentrant locks)
	Mode    string `json:"mode,omitempty"`    // "exclusive", "read", "write" or "permit"
	Fence   uint64 `json:"fence,omitempty"`   // this holder's fence, where the backend knows it
	Session string `json:"session,omitempty"` // ZooKeeper session, in hex
	Node    string `json:"node,omitempty"`    // ZooKeeper node
}

// A NodeReport is one Redlock master's view of a lock.
type NodeReport struct {
	Addr   string `json:"addr"`
	Kind   string `json:"kind,omitempty"`
	Holder string `json:"holder,omitempty"`
	Fence  uint64 `json:"fence,omitempty"`
	TTLms  int64  `json:"ttl_ms,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Inspect reports who holds the lock called name.
func (t *Target) Inspect(ctx context.Context, name string) (Report, error) {
	r := Report{Name: name, Backend: t.Kind(), Where: t.Describe()}
	r.Forced = t.forcedNote(ctx, name)
	switch {
	case t.single != nil:
		info, err := t.single.Inspect(ctx, name)
		if err != nil {
			return r, err
		}
		fromRedis(&r, info)
	case t.quorum != nil:
		var ok []redislock.Info
		var errs []error
		for i, c := range t.nodes {
			n := NodeReport{Addr: t.spec.Redis[i].Addr}
			info, err := c.Inspect(ctx, name)
			if err != nil {
				n.Error, errs = err.Error(), append(errs, fmt.Errorf("%s: %w", n.Addr, err))
			} else {
				n.Kind, n.Fence, n.TTLms = info.Kind, info.Fence, info.TTL.Milliseconds()
				if len(info.Holders) > 0 {
					n.Holder = info.Holders[0].Owner
				}
				ok = append(ok, info)
			}
			r.Nodes = append(r.Nodes, n)
		}
		if len(ok) <= len(t.nodes)/2 {
			return r, fmt.Errorf("only %d of %d Redlock masters answered: %w", len(ok), len(t.nodes), errors.Join(errs...))
		}
		majorityView(&r)
	case t.zk != nil:
		r.Where = ZKPath(name)
		info, err := t.zk.Inspect(ctx, ZKPath(name))
		if err != nil {
			return r, err
		}
		r.Kind, r.Held, r.Waiters = info.Kind, len(info.Holders) > 0, info.Waiters
		r.PermitsInUse, r.PermitLimit, r.Unknown = info.PermitsInUse, info.PermitLimit, info.Nodes
		r.Holders = []ReportHolder{}
		for _, h := range info.Holders {
			r.Holders = append(r.Holders, ReportHolder{Owner: h.Owner, Mode: h.Mode, Fence: h.Fence,
				Session: "0x" + strconv.FormatInt(h.Session, 16), Node: h.Node})
			r.Fence = max(r.Fence, h.Fence)
			if h.Mode == "read" {
				r.Readers++
			}
		}
	}
	return r, nil
}

func fromRedis(r *Report, info redislock.Info) {
	r.Kind, r.Fence, r.TTLms = info.Kind, info.Fence, info.TTL.Milliseconds()
	r.Waiters, r.Readers = info.Queue, info.Readers
	r.PermitsInUse, r.PermitLimit = info.PermitsInUse, info.PermitLimit
	r.Holders = []ReportHolder{}
	for _, h := range info.Holders {
		mode := "exclusive"
		if info.Kind == "semaphore" {
			mode = "permit"
		}
		r.Holders = append(r.Holders, ReportHolder{Owner: h.Owner, Holds: h.Holds, Mode: mode})
	}
	if info.Writer != "" {
		r.Holders = append(r.Holders, ReportHolder{Owner: info.Writer, Holds: 1, Mode: "write"})
	}
	r.Held = len(r.Holders) > 0 || info.Readers > 0 || info.PermitsInUse > 0
	// info.Fence is the counter of the name's slot, which other names
	// share: the holder's fence is at most that, not that.
}

// majorityView sums up a Redlock lock: held by an owner only if a majority
// of masters has that owner's key; the fence is the highest counter.
func majorityView(r *Report) {
	votes := map[string]int{}
	var ttls = map[string]int64{}
	r.Holders = []ReportHolder{}
	r.Kind = "free"
	for _, n := range r.Nodes {
		r.Fence = max(r.Fence, n.Fence)
		if n.Holder != "" {
			votes[n.Holder]++
			if ttls[n.Holder] == 0 || n.TTLms < ttls[n.Holder] {
				ttls[n.Holder] = n.TTLms
			}
		}
	}
	for owner, v := range votes {
		if v > len(r.Nodes)/2 {
			r.Kind, r.Held, r.TTLms = "exclusive", true, ttls[owner]
			r.Holders = append(r.Holders, ReportHolder{Owner: owner, Holds: 1, Mode: "exclusive"})
		} else if r.Kind == "free" {
			r.Kind = "split" // keys on a minority: a failed or expiring attempt
		}
	}
}

// forcedNoteLife is how long the note of a forced release stays.
const forcedNoteLife = 24 * time.Hour

// forcedKey is where the note of name's last forced release is kept.
func forcedKey(name string) string { return "dlock:{" + name + "}:forced" }

// noteForced leaves a note of a forced release on every Redis server that
// answers, for forcedNoteLife: who, when, and what was removed.
func (t *Target) noteForced(ctx context.Context, name string, removed int) {
	user := os.Getenv("USER")
	if user == "" {
		user = "?"
	}
	note := fmt.Sprintf("%s by %s (user %s): removed %d", time.Now().UTC().Format(time.RFC3339), ClientName(), user, removed)
	for _, rdb := range t.rdbs {
		rdb.Set(ctx, forcedKey(name), note, forcedNoteLife) // a note that cannot be written is not worth failing for
	}
}

// forcedNote returns the note of name's last forced release, or "".
func (t *Target) forcedNote(ctx context.Context, name string) string {
	for _, rdb := range t.rdbs {
		if v, err := rdb.GetRange(ctx, forcedKey(name), 0, 255).Result(); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// ForceRelease removes every holder of the lock called name and wakes its
// waiters, and on Redis leaves a note of it (see Report.Forced). It
// reports how many holders, nodes or keys it removed.
func (t *Target) ForceRelease(ctx context.Context, name string) (int, error) {
	n, err := t.forceRelease(ctx, name)
	if n > 0 {
		t.noteForced(ctx, name, n)
	}
	return n, err
}

func (t *Target) forceRelease(ctx context.Context, name string) (int, error) {
	switch {
	case t.single != nil:
		ok, err := t.single.ForceUnlock(ctx, name)
		return b2i(ok), err
	case t.quorum != nil:
		n, answered := 0, 0
		var errs []error
		for i, c := range t.nodes {
			ok, err := c.ForceUnlock(ctx, name)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.spec.Redis[i].Addr, err))
				continue
			}
			answered++
			n += b2i(ok)
		}
		if len(errs) > 0 {
			return n, fmt.Errorf("released on %d of %d masters; the others keep the lock until its TTL runs out: %w",
				answered, len(t.nodes), errors.Join(errs...))
		}
		return n, nil
	case t.zk != nil:
		return t.zk.ForceUnlock(ctx, ZKPath(name))
	}
	return 0, errors.New("not connected")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TTL returns the report's remaining lease time.
func (r Report) TTL() time.Duration { return time.Duration(r.TTLms) * time.Millisecond }
