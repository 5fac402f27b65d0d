package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	osuser "os/user"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// A Report describes one lock, whatever the backend. Fences are written
// as strings in JSON: they can exceed 2^53, past which a JSON number loses
// digits in many readers.
type Report struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`                // "redis", "redlock", "zookeeper", "postgres" or "mysql"
	Where   string `json:"where"`                  // the service: its kind and addresses
	Path    string `json:"path,omitempty"`         // the ZooKeeper path, or the etcd key prefix
	Kind    string `json:"kind"`                   // a dlock.Kind: "free", "mutex", "fair-mutex", "reentrant-mutex", "rwmutex", "semaphore", "unknown"; "split" for Redlock keys on a minority
	Held    bool   `json:"held"`                   // anyone holds it
	Fence   uint64 `json:"fence,string,omitempty"` // the latest fence granted (Redis: to any name of the name's Cluster slot)
	TTLms   int64  `json:"ttl_ms,omitempty"`       // time left on the lease (Redis)

	Holders     []ReportHolder `json:"holders"`
	Waiters     *int           `json:"waiters,omitempty"` // nil where the backend cannot count them (PostgreSQL, MySQL)
	PermitLimit int            `json:"permit_limit,omitempty"`
	// Detail says what was found on a name of kind "unknown".
	Detail string `json:"detail,omitempty"`
	// Nodes is each Redlock master's own view.
	Nodes []NodeReport `json:"nodes,omitempty"`
	// Forced is the note of the last "dlock release --force" of the
	// lock, for a day (Redis): who removed how many holders, and when.
	Forced string `json:"forced,omitempty"`
}

// A ReportHolder is one holder of a lock.
type ReportHolder struct {
	Owner string `json:"owner"`                  // the holder's token
	Label string `json:"label,omitempty"`        // what the holder said about itself (dlock run: host, pid, start)
	Mode  string `json:"mode"`                   // "exclusive", "read", "write" or "permit"
	Holds int    `json:"holds,omitempty"`        // hold count (reentrant locks)
	Fence uint64 `json:"fence,string,omitempty"` // this holder's fence, where the backend knows it
	Where string `json:"where,omitempty"`        // where the backend keeps the hold (ZooKeeper: node and session)
}

// A NodeReport is one Redlock master's view of a lock.
type NodeReport struct {
	Addr   string `json:"addr"`
	Kind   string `json:"kind,omitempty"`
	Holder string `json:"holder,omitempty"`
	Fence  uint64 `json:"fence,string,omitempty"`
	TTLms  int64  `json:"ttl_ms,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Inspect reports who holds the lock called name.
func (t *Target) Inspect(ctx context.Context, name string) (Report, error) {
	forced := make(chan string, 1) // read beside the lock, not before it
	go func() { forced <- t.forcedNote(ctx, name) }()
	r, err := t.inspect(ctx, name)
	r.Forced = <-forced
	return r, err
}

func (t *Target) inspect(ctx context.Context, name string) (Report, error) {
	r := Report{Name: name, Backend: t.Kind(), Where: t.Describe()}
	switch {
	case t.quorum != nil:
		var ok []dlock.Info
		var errs []error
		infos := make([]dlock.Info, len(t.nodes))
		failed := make([]error, len(t.nodes))
		eachNode(ctx, len(t.nodes), NodeTimeout(0), func(ctx context.Context, i int) {
			infos[i], failed[i] = t.nodes[i].Inspect(ctx, name)
		})
		for i, info := range infos {
			n := NodeReport{Addr: t.spec.Redis[i].Addr}
			if err := failed[i]; err != nil {
				n.Error, errs = err.Error(), append(errs, fmt.Errorf("%s: %w", n.Addr, err))
			} else {
				n.Kind, n.Fence, n.TTLms = string(info.Kind), info.Fence, info.TTL.Milliseconds()
				if len(info.Holders) > 0 {
					n.Holder = info.Holders[0].Owner
				}
				ok = append(ok, info)
			}
			r.Nodes = append(r.Nodes, n)
		}
		if len(ok) <= len(t.nodes)/2 {
			return r, fmt.Errorf("only %d of %d Redlock masters answered: %w", len(ok), len(t.nodes), joinErrs(errs))
		}
		majorityView(&r)
	default:
		a, key := t.admin(name)
		if a == nil {
			break
		}
		switch {
		case t.zk != nil:
			r.Path = key
		case t.etcd != nil:
			r.Path = name + "/"
		}
		info, err := a.Inspect(ctx, key)
		if err != nil {
			return r, err
		}
		r.fill(info)
		if t.pg != nil || t.my != nil {
			r.Waiters = nil // waiters wait in their own processes, uncounted
		}
	}
	return r, nil
}

// fill copies what an Inspect found into r.
func (r *Report) fill(info dlock.Info) {
	r.Kind, r.Held, r.Fence, r.TTLms = string(info.Kind), info.Held(), info.Fence, info.TTL.Milliseconds()
	r.Waiters, r.PermitLimit, r.Detail = &info.Waiters, info.PermitLimit, info.Detail
	r.Holders = []ReportHolder{}
	for _, h := range info.Holders {
		r.Holders = append(r.Holders, ReportHolder{Owner: h.Owner, Label: h.Label, Mode: h.Mode, Holds: h.Holds, Fence: h.Fence, Where: h.Where})
	}
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

// forcedNoteLife is how long the note of a forced release stays.
const forcedNoteLife = 24 * time.Hour

// forcedKey is where the note of name's last forced release is kept.
func forcedKey(name string) string { return "dlock:{" + name + "}:forced" }

// noteForced leaves a note of a forced release on every Redis server that
// answers, for forcedNoteLife: who, when, and what was removed.
func (t *Target) noteForced(ctx context.Context, name string, removed int) {
	user := os.Getenv("USER")
	if u, err := osuser.Current(); user == "" && err == nil {
		user = u.Username
	}
	if user == "" {
		user = "uid " + strconv.Itoa(os.Getuid())
	}
	note := fmt.Sprintf("%s by %s (user %s): removed %d", time.Now().UTC().Format(time.RFC3339), ClientName(), user, removed)
	eachNode(ctx, len(t.rdbs), NodeTimeout(0), func(ctx context.Context, i int) {
		t.rdbs[i].Set(ctx, forcedKey(name), note, forcedNoteLife) // a note that cannot be written is not worth failing for
	})
}

// forcedNote returns the note of name's last forced release, or "": the
// first found, in the order of the servers, among those that answer
// within NodeTimeout(0).
func (t *Target) forcedNote(ctx context.Context, name string) string {
	notes := make([]string, len(t.rdbs))
	eachNode(ctx, len(t.rdbs), NodeTimeout(0), func(ctx context.Context, i int) {
		notes[i], _ = t.rdbs[i].GetRange(ctx, forcedKey(name), 0, 255).Result()
	})
	for _, v := range notes {
		if v != "" {
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
	if t.quorum != nil {
		// Count the masters that hold a key, for the report, then remove
		// them with redlock's ForceUnlock, which also keeps a renewal under
		// way from taking a master back (its deposed set).
		var holding atomic.Int32
		eachNode(ctx, len(t.nodes), NodeTimeout(0), func(ctx context.Context, i int) {
			if info, err := t.nodes[i].Inspect(ctx, name); err == nil && len(info.Holders) > 0 {
				holding.Add(1)
			}
		})
		n := int(holding.Load())
		held, err := t.quorum.ForceUnlock(ctx, name)
		if held {
			n = max(n, 1)
		}
		if err != nil {
			return n, fmt.Errorf("not released on every master; a master that did not answer keeps the lock until its TTL runs out: %w", err)
		}
		return n, nil
	}
	if a, key := t.admin(name); a != nil {
		held, err := a.ForceUnlock(ctx, key)
		return b2i(held), err
	}
	return 0, errors.New("not connected")
}

// admin returns the Client that inspects and releases the lock called
// name on a single service, and the name it knows the lock by (a path on
// ZooKeeper); nil for Redlock, whose masters are inspected one by one.
func (t *Target) admin(name string) (dlock.Admin, string) {
	switch {
	case t.single != nil:
		return t.single, name
	case t.zk != nil:
		return t.zk, ZKPath(name)
	case t.etcd != nil:
		return t.etcd, name
	case t.pg != nil:
		return t.pg, name
	case t.my != nil:
		return t.my, name
	}
	return nil, name
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TTL returns the report's remaining lease time.
func (r Report) TTL() time.Duration { return time.Duration(r.TTLms) * time.Millisecond }
