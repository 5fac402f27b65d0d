package backend

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
)

// A Report describes one lock, whatever the backend. Fences are written
// as strings in JSON: they can exceed 2^53, past which a JSON number loses
// digits in many readers.
type Report struct {
	Name    string `json:"name"`
	Backend string `json:"backend"`                // Spec.Kind: "redis", "redlock", "zookeeper", "postgres", "mysql" or "etcd"
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
	go func() {
		n, _ := t.c.(forcedNoter)
		if n == nil {
			forced <- ""
			return
		}
		forced <- n.forcedNote(ctx, name)
	}()
	r, err := t.inspect(ctx, name)
	r.Forced = <-forced
	return r, err
}

func (t *Target) inspect(ctx context.Context, name string) (Report, error) {
	r := Report{Name: name, Backend: t.Kind(), Where: t.Describe()}
	if in, ok := t.c.(inspector); ok {
		return r, in.inspect(ctx, name, &r)
	}
	a, key, path := t.c.admin(name)
	r.Path = path
	info, err := a.Inspect(ctx, key)
	if err != nil {
		return r, err
	}
	r.fill(info)
	if t.drv.waiters == waitersUncounted {
		r.Waiters = nil // waiters wait in their own processes, uncounted
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

// ForceRelease removes every holder of the lock called name and wakes its
// waiters, and on Redis leaves a note of it (see Report.Forced). It
// reports how many holders, nodes or keys it removed.
func (t *Target) ForceRelease(ctx context.Context, name string) (int, error) {
	n, err := t.forceRelease(ctx, name)
	if f, ok := t.c.(forcedNoter); ok && n > 0 {
		f.noteForced(ctx, name, n)
	}
	return n, err
}

func (t *Target) forceRelease(ctx context.Context, name string) (int, error) {
	if f, ok := t.c.(forceReleaser); ok {
		return f.forceRelease(ctx, name)
	}
	a, key, _ := t.c.admin(name)
	held, err := a.ForceUnlock(ctx, key)
	return b2i(held), err
}

// Removed says what ForceRelease removed when it reports n, and what
// became of the waiters: "removed 1 holder; waiters were woken".
func (t *Target) Removed(n int) string {
	what := cmp.Or(t.drv.removed, "holder")
	if n != 1 {
		what = cmp.Or(t.drv.removedMany, "holders")
	}
	return fmt.Sprintf("removed %d %s; %s", n, what, cmp.Or(t.drv.woken, "waiters were woken"))
}

// FenceNote says what the report's fence is, for people: the latest fence
// granted, on Redis to any name of the lock's Cluster slot.
func (r Report) FenceNote() string {
	if d := driverNamed(r.Backend); d != nil && d.fenceNote != "" {
		return d.fenceNote
	}
	return "latest granted"
}

// WaitersNote says how many wait for the lock, for people, and false if
// the backend has no waiters to speak of (Redlock).
func (r Report) WaitersNote() (string, bool) {
	switch {
	case driverNamed(r.Backend) != nil && driverNamed(r.Backend).waiters == waitersNone:
		return "", false
	case r.Waiters == nil:
		return fmt.Sprintf("unknown (%s cannot count them)", r.Backend), true
	}
	return strconv.Itoa(*r.Waiters), true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TTL returns the report's remaining lease time.
func (r Report) TTL() time.Duration { return time.Duration(r.TTLms) * time.Millisecond }
