package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// inspectAttempts bounds how many listings Inspect and ForceUnlock take
// when a node they read vanishes under them (the lock changed hands).
const inspectAttempts = 5

// Inspect reports which kind of lock uses path, which nodes hold it and
// how many wait, deciding who holds by the rules the locks themselves
// use. It takes one listing of the path's children and one read of each
// holder (and of a writer whose downgrade lets readers in); if a node
// vanishes in between, it lists again. A path that does not exist is
// free. Inspect creates nothing and watches nothing.
//
// Info.TTL is 0 (a node lives as long as its session), Info.Fence is the
// highest holder's fence, and each Holder's Where names its node and
// session; its Owner is cut to 256 bytes and "..." (ZooKeeper sends a
// node's data whole, up to the ensemble's jute.maxbuffer). A Mutex of
// Curator or go-zookeeper's zk.Lock on the path is reported as
// dlock.KindMutex: their nodes are named alike.
func (s *Client) Inspect(ctx context.Context, path string) (dlock.Info, error) {
	if err := checkPath(path); err != nil {
		return dlock.Info{}, err
	}
	if err := s.usable(); err != nil {
		return dlock.Info{}, err
	}
	for attempt := 1; ; attempt++ {
		sn, err := s.snapshot(ctx, "inspect", path)
		if err != nil || sn.info.Kind == dlock.KindFree || sn.info.Kind == dlock.KindUnknown {
			return sn.info, err
		}
		info, vanished, err := s.describeHolders(ctx, sn, attempt == inspectAttempts)
		if !vanished {
			return info, err
		}
	}
}

// ForceUnlock is an operator's override: it deletes every node that holds
// the lock on path (a mutex's holder, an RWMutex's readers or writer, a
// semaphore's leases), decided by the rules Inspect reports, and reports
// whether it deleted any. The waiters behind those
// nodes are woken by their watches and take the lock in queue order. A
// holder's node that vanishes meanwhile (released, or deleted with its
// session) is not counted and is no error (nor is one whose deletion lost
// its reply to a broken connection and was found done when tried again),
// and nodes that came to hold after ForceUnlock's listing are left alone.
// If a deletion fails, ForceUnlock stops and returns the error, with true
// if it had deleted a node before. On a path of Kind dlock.KindUnknown it
// deletes nothing and returns an error saying why.
//
// The holders are not told at once. Each finds its node gone at its next
// confirmation, which comes every third of its lease time (the smaller of
// WithTTL and a third of the session timeout), and its leases then end
// with an error matching both dlock.ErrLost and dlock.ErrTakenOver; a
// holder cut off from the ensemble ends at its Until with dlock.ErrExpired
// instead. Until then the old holder and the new one may both believe
// they hold the lock: only their fences tell them apart.
func (s *Client) ForceUnlock(ctx context.Context, path string) (bool, error) {
	if err := checkPath(path); err != nil {
		return false, err
	}
	if err := s.usable(); err != nil {
		return false, err
	}
	sn, err := s.snapshot(ctx, "force unlock", path)
	switch {
	case err != nil:
		return false, err
	case sn.info.Kind == dlock.KindUnknown:
		return false, fmt.Errorf("zklock: force unlock %q: %s; nothing was deleted", path, sn.reason)
	}
	deleted := 0
	for _, i := range sn.held {
		name := sn.kids[i].name
		err := untilAnswered(ctx, func() error { return s.delete(ctx, path+"/"+name) })
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, zk.ErrNoNode):
		default:
			return deleted > 0, failure("force unlock", path, "deleting "+name, err)
		}
	}
	return deleted > 0, nil
}

// A snapshot is what one listing of a lock path says: its kind, its
// children in queue order, and which of them hold.
type snapshot struct {
	info   dlock.Info // Name, Kind, Waiters and PermitLimit filled in
	parent *zk.Stat   // the path's, from the listing
	kids   []child    // sorted by sequence
	held   []int      // indexes into kids
	reason string     // why Kind is dlock.KindUnknown
	nodes  nodeCache  // the nodes read so far
}

// snapshot lists dir's children and decides which hold, with the rules of
// the kind of lock that made them. A reader behind a writer holds if the
// writer was downgraded, which takes a read of the writer; if the writer
// has vanished by then, snapshot lists again.
func (s *Client) snapshot(ctx context.Context, call, dir string) (snapshot, error) {
	for attempt := 1; ; attempt++ {
		var names []string
		var parent *zk.Stat
		err := untilAnswered(ctx, func() (err error) {
			names, parent, err = s.children(ctx, dir)
			return err
		})
		sn := snapshot{info: dlock.Info{Name: dir, Kind: dlock.KindFree}, parent: parent, nodes: nodeCache{}}
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return sn, nil
		case err != nil:
			return sn, failure(call, dir, "listing its children", err)
		case len(names) == 0:
			return sn, nil
		}
		kids, k, why := classify(names)
		if why != "" {
			slices.Sort(names)
			sn.info.Kind, sn.info.Detail, sn.reason = dlock.KindUnknown, unknownDetail(why, names), why
			return sn, nil
		}
		if len(kids) == 0 {
			return sn, nil // only the empty nodes of a Semaphore's Curator layout
		}
		sn.kids = kids
		decide := s.rules(dir, k, kids[0].permits)
		switch k {
		case kindLock:
			sn.info.Kind = dlock.KindMutex
		case kindRead, kindWrite:
			sn.info.Kind = dlock.KindRWMutex
		case kindPermit:
			sn.info.Kind, sn.info.PermitLimit = dlock.KindSemaphore, kids[0].permits
		}
		vanished := false
		for i, c := range kids {
			rule, ok := decide[c.kind]
			if !ok { // another kind's attempt, queued behind the holder: it waits
				sn.info.Waiters++
				continue
			}
			v := judge(kids, i, rule)
			if !v.held && v.downgradable {
				// As queue.watch: the writer ahead lets this reader in if
				// it was downgraded (its data version is above 0).
				n, err := sn.nodes.read(ctx, s, dir, v.watch)
				switch {
				case errors.Is(err, zk.ErrNoNode):
					vanished = true
				case err != nil:
					return sn, failure(call, dir, "reading "+v.watch, err)
				default:
					v.held = n.stat.Version > 0
				}
			}
			if v.held {
				sn.held = append(sn.held, i)
			} else {
				sn.info.Waiters++
			}
		}
		if !vanished || attempt == inspectAttempts {
			// On the last attempt, a reader whose writer vanished counts as
			// waiting: it has yet to list again to learn that it holds.
			return sn, nil
		}
	}
}

// describeHolders reads each holder of sn and returns the Info. It reports
// vanished if a holder's node has gone (the lock changed hands since the
// listing), unless last is set: then the holder is left out, as released.
func (s *Client) describeHolders(ctx context.Context, sn snapshot, last bool) (info dlock.Info, vanished bool, err error) {
	info = sn.info
	for _, i := range sn.held {
		c := sn.kids[i]
		n, err := sn.nodes.read(ctx, s, info.Name, c.name)
		switch {
		case errors.Is(err, zk.ErrNoNode) && last:
			continue
		case errors.Is(err, zk.ErrNoNode):
			return dlock.Info{}, true, nil
		case err != nil:
			return dlock.Info{}, false, failure("inspect", info.Name, "reading "+c.name, err)
		}
		owner := ownerOf(n.data)
		h := dlock.Holder{Owner: owner, Label: lease.Label(owner), Holds: 1, Fence: fenceOf(sn.parent.Ctime, c.seq),
			Where: fmt.Sprintf("node %s of session 0x%x", c.name, n.stat.EphemeralOwner)}
		switch c.kind {
		case kindLock:
			h.Mode = dlock.ModeExclusive
		case kindRead:
			h.Mode = dlock.ModeRead
		case kindWrite:
			h.Mode = dlock.ModeWrite
			if n.stat.Version > 0 {
				h.Mode = dlock.ModeRead // downgraded
			}
		case kindPermit:
			h.Mode = dlock.ModePermit
		}
		info.Holders = append(info.Holders, h)
		info.Fence = max(info.Fence, h.Fence)
	}
	return info, false, nil
}

// unknownDetail says why a path's children are not one dlock lock's, and
// lists them (the first 20) for the operator to judge.
func unknownDetail(why string, names []string) string {
	shown := names[:min(len(names), 20)]
	more := ""
	if len(names) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return fmt.Sprintf("%s; children: %s%s", why, strings.Join(shown, ", "), more)
}

// classify parses names, the children of a lock path, and sorts them by
// sequence. It returns the kind of their first node (for an RWMutex,
// kindRead and kindWrite are one kind of lock), which holds the path: the
// nodes of other kinds behind it wait (see judge). Or it returns the
// reason they are not the nodes of dlock locks.
func classify(names []string) (kids []child, k kind, why string) {
	kids = make([]child, 0, len(names))
	for _, name := range names {
		if name == curatorLocks || name == curatorLeases {
			continue // a Semaphore's, of Curator's layout: see Semaphore
		}
		c, ok := parseChild(name)
		switch {
		case !ok && overflowed(name):
			return nil, 0, fmt.Sprintf("ZooKeeper's sequence counter has overflowed (node %q)", name)
		case !ok && latchNode(name):
			return nil, 0, fmt.Sprintf("node %q is a Curator LeaderLatch's, which does not share zklock's layout", name)
		case !ok:
			continue // another lock's path, or a node of the user's: see parseChildren
		}
		kids = append(kids, c)
	}
	slices.SortFunc(kids, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	if len(kids) == 0 {
		return nil, 0, ""
	}
	first := kids[0]
	for _, c := range kids[1:] {
		if c.kind == kindPermit && first.kind == kindPermit && c.permits != first.permits {
			return nil, 0, fmt.Sprintf("semaphore nodes %q and %q disagree on the number of leases", first.name, c.name)
		}
	}
	return kids, first.kind, ""
}

// sameLock reports whether nodes a and b are of one lock, which may hold
// a path at once: nodes of one kind (of a semaphore, with the same number
// of permits), or an RWMutex's readers and writers.
func sameLock(a, b child) bool {
	rw := func(k kind) bool { return k == kindRead || k == kindWrite }
	return a.kind == b.kind && a.permits == b.permits || rw(a.kind) && rw(b.kind)
}

// rules returns, for each kind of node of the lock of kind k on dir, the
// rule that decides whether it holds: that of the queue that makes such
// nodes.
func (s *Client) rules(dir string, k kind, permits int) map[kind]func([]child, int) verdict {
	switch k {
	case kindRead, kindWrite:
		rw := s.NewRWMutex(dir)
		return map[kind]func([]child, int) verdict{kindRead: rw.reader.decide, kindWrite: rw.writer.decide}
	case kindPermit:
		return map[kind]func([]child, int) verdict{kindPermit: s.NewSemaphore(dir, permits).q.decide}
	}
	return map[kind]func([]child, int) verdict{kindLock: s.NewMutex(dir).q.decide}
}

// A nodeCache holds the nodes read during one snapshot, by name.
type nodeCache map[string]nodeData

type nodeData struct {
	data []byte
	stat *zk.Stat
}

// read returns the data and Stat of dir's child name, reading it once.
func (c nodeCache) read(ctx context.Context, s *Client, dir, name string) (nodeData, error) {
	if n, ok := c[name]; ok {
		return n, nil
	}
	var n nodeData
	err := untilAnswered(ctx, func() (err error) {
		n, err = s.get(ctx, dir+"/"+name)
		return err
	})
	if err == nil {
		c[name] = n
	}
	return n, err
}

// get is Get bounded by ctx, like the calls in calls.go.
func (s *Client) get(ctx context.Context, path string) (nodeData, error) {
	return call(ctx, s, func(c *zk.Conn) (nodeData, error) {
		data, st, err := c.Get(path)
		return nodeData{data: data, stat: st}, err
	})
}

// untilAnswered runs op, a read or a delete that may safely be repeated, until the
// ensemble answers it rather than the connection failing (or the session
// expiring, after which the Client carries on in a new one), or until ctx
// is done.
func untilAnswered(ctx context.Context, op func() error) error {
	for n := 1; ; n++ {
		err := op()
		if !transient(err) && !errors.Is(err, zk.ErrSessionExpired) {
			return err
		}
		if pause(ctx, n) != nil {
			return fmt.Errorf("%w (the last attempt failed: %w)", ctx.Err(), err)
		}
	}
}

// failure turns a failed call made by Inspect or ForceUnlock (call) on
// path, while doing what doing says, into an error that says so.
func failure(call, path, doing string, err error) error {
	switch {
	case errors.Is(err, zk.ErrClosing):
		return ErrClosed
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("zklock: %s %q: %s: %w (the node's ACL refuses this session; connect with WithDigestAuth as a user the ACL names)", call, path, doing, err)
	}
	return fmt.Errorf("zklock: %s %q: %s: %w", call, path, doing, err)
}

// ownerOf returns the owner token a node's data holds: the data itself,
// or the token of the leader's record an election's leader wrote there;
// cut to 256 bytes and "...", since another client may have written
// large data there.
func ownerOf(data []byte) string {
	s := string(data)
	if r, err := election.Parse(s); err == nil {
		s = r.Token
	}
	if len(s) > 256 {
		return s[:256] + "..."
	}
	return s
}
