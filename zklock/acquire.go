package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

// A queue is one side of a lock on one path: the kind of node it creates
// and the rule that decides, from the sorted children of the path, whether
// a node holds the lock and which node it waits on. Mutex, RWMutex and
// Semaphore are queues with different rules.
type queue struct {
	s       *Client
	dir     string
	kind    kind
	permits int    // for kindPermit
	label   string // node label: label(kind, permits)
	allowed []kind // the kinds of node of this lock (an RWMutex's: read and write)
	cfg     config
	decide  func(kids []child, me int) verdict
	err     error         // from a bad path or option; returned by every call
	ev      *lease.Events // nil without an observer
}

// A verdict says whether a node holds the lock, and if not what to watch.
type verdict struct {
	held bool
	// watch is the child whose deletion may let the node in; "" with
	// children set means any change to the path's children may.
	watch    string
	children bool
	// downgradable: the node holds if watch is a downgraded writer (its
	// data version is above 0).
	downgradable bool
}

func newQueue(s *Client, dir string, k kind, permits int, opts []Option, decide func([]child, int) verdict, allowed ...kind) *queue {
	q := &queue{s: s, dir: dir, kind: k, permits: permits, label: label(k, permits), allowed: allowed,
		cfg: newConfig(opts), decide: decide, ev: lease.NewEvents(s.obs, "zklock", dir, eventKinds[k])}
	if err := checkPath(dir); err != nil {
		q.err = err
	} else if err := q.cfg.check(); err != nil {
		q.err = err
	}
	return q
}

// check returns the error a call must return before it touches the
// network.
func (q *queue) check(ctx context.Context) error {
	if q.err != nil {
		return q.err
	}
	if err := q.s.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	return nil
}

// eventKinds are the lock kinds that events report, by kind of node.
var eventKinds = [...]string{kindLock: "Mutex", kindRead: "RWMutex.read", kindWrite: "RWMutex.write", kindPermit: "Semaphore"}

// pending is a created node that does not hold the lock yet.
type pending struct {
	path, name, guid string
	session          int64
}

// acquire creates a node with token as its data and waits, if wait is
// set, until it holds the lock; without wait it gives up at once. It
// reports to a when it begins to wait.
//
// Failures of the connection are waited through: the requests are made
// again once the Client has reconnected, in the same session or a new
// one. Without wait, acquire waits at most tryTimeout for that, and then
// returns an error matching dlock.ErrUnavailable, not
// dlock.ErrNotObtained; when ctx ends while the ensemble fails, the error
// matches dlock.ErrUnavailable too.
func (q *queue) acquire(ctx context.Context, token string, wait bool, a *lease.Attempt) (*Lease, error) {
	cl := &faults{}
	ctx = withFaults(ctx, cl)
	parent := ctx
	if !wait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, tryTimeout(q.cfg.ttl), errTryBound)
		defer cancel()
	}
	begin := time.Now()
	h, err := q.take(ctx, token, wait, a)
	if err == nil {
		return h, nil
	}
	switch {
	case ended(parent) != nil:
		if o := q.s.outage(cl); o.open() && errors.Is(err, dlock.ErrNotObtained) && !errors.Is(err, dlock.ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", err, q.s.unavailable(o))
		}
	case !wait && ended(ctx) != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTryBound)):
		// Nobody knows whether the lock is held.
		o := q.s.outage(cl)
		if !o.open() {
			o = outage{since: begin, last: fmt.Errorf("no answer in %v", time.Since(begin).Round(time.Millisecond))}
		}
		return nil, fmt.Errorf("zklock: TryLock %s: %w", q.dir, q.s.unavailable(o))
	}
	return nil, err
}

// take is acquire's work.
func (q *queue) take(ctx context.Context, token string, wait bool, a *lease.Attempt) (*Lease, error) {
	if !wait {
		// A look before creating anything: a held lock costs one read.
		busy, err := q.busy(ctx)
		if err != nil || busy {
			return nil, err
		}
	}
	var last error // why the last node did not hold
	for {
		p, err := q.create(ctx, token)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, dlock.ErrNotObtained) {
				return nil, lease.Interrupted(ctx.Err(), last)
			}
			return nil, err
		}
		h, again, err := q.await(ctx, p, token, wait, a)
		if !again {
			return h, err
		}
		// The node vanished before it held (its session expired, or it
		// was deleted), or held too short a lease and was given back.
		// Queue again, at the back.
		last = err
	}
}

// busy reports whether a node created now would have to wait, or an error
// with ErrNotObtained if it would.
func (q *queue) busy(ctx context.Context) (bool, error) {
	var names []string
	for n := 1; ; n++ {
		var err error
		names, _, err = q.s.children(ctx, q.dir)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case ctx.Err() != nil:
			return true, dlock.NotObtained(ctx.Err())
		case transient(err), errors.Is(err, zk.ErrSessionExpired):
			// Again, once the Client has reconnected.
			if err := pause(ctx, n); err != nil {
				return true, err
			}
			continue
		case err != nil:
			return true, describe("listing", q.dir, err)
		}
		break
	}
	kids, err := q.parse(names)
	if err != nil {
		return true, err
	}
	if err := q.refuse(kids); err != nil {
		return true, err
	}
	kids = append(kids, child{seq: 1 << 62, kind: q.kind, permits: q.permits})
	if v := q.judge(kids, len(kids)-1); v.held || v.downgradable {
		return false, nil
	}
	return true, dlock.ErrNotObtained
}

// parse parses the children of dir, which may be the nodes of any kind of
// lock (see judge), and of a semaphore of any number of permits.
func (q *queue) parse(names []string) ([]child, error) {
	return parseChildren(q.dir, names)
}

// refuse returns the error of an attempt that finds dir held by another
// kind of lock (its lowest node is another kind's), or nil. It matches
// dlock.ErrNotObtained and dlock.ErrKindMismatch, and names both kinds:
// Lock returns it at once, as TryLock does. A semaphore held by a
// semaphore of another number of permits is refused too, with an error
// that names both numbers.
func (q *queue) refuse(kids []child) error {
	switch {
	case len(kids) == 0:
		return nil
	case q.kind == kindPermit && kids[0].kind == kindPermit && kids[0].permits != q.permits:
		return fmt.Errorf("zklock: semaphore %s has %d permits (node %q); this Semaphore was made with %d",
			q.dir, kids[0].permits, kids[0].name, q.permits)
	case slices.Contains(q.allowed, kids[0].kind):
		return nil
	}
	return dlock.NotObtained(fmt.Errorf("zklock: a %s cannot take %s: it is used by a %s (node %q), and one path serves one kind of lock at a time: %w",
		q.kind, q.dir, kids[0].kind, kids[0].name, dlock.ErrKindMismatch))
}

// judge decides by q's rule whether kids[me] holds the lock; see judge.
func (q *queue) judge(kids []child, me int) verdict { return judge(kids, me, q.decide) }

// judge decides by the rule decide whether kids[me] holds the lock, on a
// path where nodes of another kind of lock may queue too: attempts that
// found the path held by another kind and are giving up, or, in a race, a
// lock of another kind that came first. No node holds past a node of
// another kind ahead of it: it waits for the last of them. Nodes of
// another kind behind it do not count. A semaphore of another number of
// permits counts as another kind.
func judge(kids []child, me int, decide func([]child, int) verdict) verdict {
	for i := me - 1; i >= 0; i-- {
		if !sameLock(kids[i], kids[me]) {
			return verdict{watch: kids[i].name}
		}
	}
	own := make([]child, 0, len(kids))
	for _, c := range kids {
		if sameLock(c, kids[me]) {
			own = append(own, c)
		}
	}
	return decide(own, me) // every node ahead of me is in own: me is its index there too
}

// A createdNode is what a create answers: the node's path, and the
// session of the connection that created it.
type createdNode struct {
	path    string
	session int64
}

// lostReply returns a create's result whose reply was lost: abandon then
// looks for the node by its guid.
func lostReply() <-chan result[createdNode] {
	ch := make(chan result[createdNode], 1)
	ch <- result[createdNode]{err: zk.ErrConnectionClosed}
	return ch
}

// newGUID returns the 32 hex digits of a protected node name.
func newGUID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// create creates an ephemeral sequential node for token, creating the
// path first if it is missing. If the reply is lost, it finds the node by
// its protected name rather than creating a second one. If it fails, it
// leaves nothing behind: a node whose create may yet land, and a path it
// created that no node used, are deleted in the background.
func (q *queue) create(ctx context.Context, token string) (_ pending, err error) {
	guid := newGUID()
	prefix := q.dir + "/" + protectedPrefix + guid + "-" + q.label
	uncertain := false // a create lost its reply: a node may exist
	madeDir := false   // this attempt created q.dir
	parents := false   // ensureParents has made q.dir for this attempt
	restarts := 0      // how often the parents were made again (see maxParentRestarts)
	defer func() {
		if err != nil && uncertain {
			q.s.abandon(lostReply(), q.dir, guid)
		}
		if err != nil && madeDir {
			q.s.removeUnused(q.dir)
		}
	}()
	for n := 1; ; n++ {
		if err := q.s.usable(); err != nil {
			return pending{}, err
		}
		l := q.s.link.Load()
		sent := time.Now()
		created := start(func() (createdNode, error) {
			n, err := onLink(l, func(c *zk.Conn) (createdNode, error) {
				p, err := c.Create(prefix, []byte(token), zk.FlagEphemeralSequential, q.s.cfg.acl)
				return createdNode{p, c.SessionID()}, err
			})
			return n, q.s.retiredErr(err)
		})
		var r result[createdNode]
		select {
		case r = <-created:
			report(ctx, sent, r.err, false)
		case <-ctx.Done():
			report(ctx, sent, nil, true)
			q.s.abandon(created, q.dir, guid)
			return pending{}, dlock.NotObtained(ctx.Err())
		}
		if transient(r.err) {
			uncertain = true
		}
		switch {
		case r.err == nil:
			return pending{path: r.v.path, name: path.Base(r.v.path), guid: guid, session: r.v.session}, nil
		case errors.Is(r.err, zk.ErrNoNode):
			// The path is missing, or a parent made for this create went
			// before it: an empty container that ZooKeeper reaped, or
			// another client's clean-up. Make the parents again.
			if parents {
				if restarts >= maxParentRestarts {
					return pending{}, parentsGone("creating a lock node under", q.dir, restarts, r.err)
				}
				restarts++
			}
			made, err := q.s.ensureParents(ctx, q.dir, &restarts)
			madeDir = madeDir || made
			if err != nil {
				return pending{}, err
			}
			parents = true
			if f := q.s.afterParents; f != nil {
				f(q.dir)
			}
			continue
		case transient(r.err):
			if p, ok := q.found(ctx, guid); ok {
				return p, nil
			}
		case !errors.Is(r.err, zk.ErrSessionExpired):
			return pending{}, describe("creating a lock node under", q.dir, r.err)
		}
		// Nothing was created (or it went with an expired session): again.
		if err := pause(ctx, n); err != nil {
			return pending{}, err
		}
	}
}

// found looks for the node of a create of guid whose reply was lost, and
// returns it if it belongs to the Client's current session. Any other
// node of guid (of a session since given up) is deleted in the background.
func (q *queue) found(ctx context.Context, guid string) (pending, bool) {
	names := q.s.findOwn(ctx, q.dir, guid)
	if len(names) == 0 {
		return pending{}, false
	}
	p := q.dir + "/" + names[0]
	exists, st, err := q.s.exists(ctx, p)
	if err == nil && exists && st.EphemeralOwner != 0 && st.EphemeralOwner == q.s.ID() {
		// Any other node of this guid is deleted by await.
		return pending{path: p, name: names[0], guid: guid, session: st.EphemeralOwner}, true
	}
	for _, name := range names {
		q.s.removeLater(q.dir + "/" + name)
	}
	return pending{}, false
}

// await waits until p holds the lock (or, without wait, finds that it
// does not, and deletes it). It reports again if p vanished before it
// held, so that the caller creates another node.
func (q *queue) await(ctx context.Context, p pending, token string, wait bool, a *lease.Attempt) (h *Lease, again bool, err error) {
	s := q.s
	giveUp := func(err error) (*Lease, bool, error) {
		s.removeLater(p.path)
		return nil, false, err
	}
	looked := false // whether a listing has shown p
	for n := 1; ; n++ {
		if id := s.ID(); id != 0 && id != p.session {
			// p's session has ended, or was given up: the ensemble deletes
			// p, or will when it expires that session. Queue again.
			s.removeLater(p.path)
			return nil, true, nil
		}
		start := time.Now()
		var names []string
		var st *zk.Stat
		var dirWatch <-chan zk.Event
		if q.kind == kindPermit && wait {
			// A semaphore waiter waits for any change after this very
			// listing: a watch set by a later request could miss one.
			names, st, dirWatch, err = s.childrenW(ctx, q.dir)
		} else {
			names, st, err = s.children(ctx, q.dir)
		}
		switch {
		case ctx.Err() != nil:
			return giveUp(dlock.NotObtained(ctx.Err()))
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
			return nil, true, nil
		case transient(err):
			if err := pause(ctx, n); err != nil {
				return giveUp(err)
			}
			continue
		case err != nil:
			return giveUp(describe("listing", q.dir, err))
		}
		kids, err := q.parse(names)
		if err != nil {
			return giveUp(err)
		}
		me := -1
		for i, c := range kids {
			switch {
			case c.name == p.name:
				me = i
			case ownedBy(c.name, p.guid):
				// A second node from a create whose reply was lost.
				s.removeLater(q.dir + "/" + c.name)
			}
		}
		if me < 0 {
			return nil, true, nil
		}
		if !looked {
			// Another kind of lock holds the path: give up at once, Lock
			// as TryLock. Once p is queued, a node of another kind ahead of
			// it is waited for (see judge).
			if err := q.refuse(kids); err != nil {
				q.remove(ctx, p)
				return nil, false, err
			}
			// Once p is in q.dir, q.dir cannot be replaced: its ACL is the
			// one p lives under.
			switch err := s.checkACL(ctx, q.dir, p.path, st); {
			case ctx.Err() != nil:
				return giveUp(dlock.NotObtained(ctx.Err()))
			case transient(err):
				if err := pause(ctx, n); err != nil {
					return giveUp(err)
				}
				continue
			case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
				return nil, true, nil
			case err != nil && !errors.Is(err, ErrPathACL):
				return giveUp(describe("reading the ACL of", q.dir, err))
			case err != nil:
				q.remove(ctx, p)
				return nil, false, err
			}
			looked = true
		}
		v := q.judge(kids, me)
		var watch <-chan zk.Event
		if !v.held {
			if !wait && !v.downgradable {
				q.remove(ctx, p)
				return nil, false, dlock.ErrNotObtained
			}
			v.held, watch, err = q.watch(ctx, v, dirWatch)
			switch {
			case ctx.Err() != nil:
				return giveUp(dlock.NotObtained(ctx.Err()))
			case errors.Is(err, zk.ErrSessionExpired):
				return nil, true, nil
			case transient(err):
				if err := pause(ctx, n); err != nil {
					return giveUp(err)
				}
				continue
			case err != nil:
				return giveUp(describe("watching under", q.dir, err))
			}
		}
		if v.held {
			h, err := q.grant(ctx, p, token, fenceOf(st.Ctime, kids[me].seq), start)
			if err == nil {
				if err := lease.Fresh(ctx, h, q.span()); err != nil {
					return nil, wait && ctx.Err() == nil, err // given back: Lock queues again
				}
				return h, false, nil
			}
			switch {
			case errors.Is(err, errSessionEnded):
				s.removeLater(p.path)
				return nil, true, nil
			case !errors.Is(err, errTooSlow):
				return h, false, err
			case !wait:
				q.remove(ctx, p)
				return nil, false, err
			}
			continue // confirm again, with a fresh start time
		}
		if !wait { // the writer ahead was not downgraded after all
			q.remove(ctx, p)
			return nil, false, dlock.ErrNotObtained
		}
		if watch != nil {
			a.Waiting()
			select {
			case <-ctx.Done():
				return giveUp(dlock.NotObtained(ctx.Err()))
			case <-watch:
			}
		}
	}
}

// watch sets the watch v asks for, or returns dirWatch, the watch set by
// the listing, when v asks for the children. It reports held if the
// watched node turns out to be a downgraded writer, and a nil channel if
// the watched node has gone already (look again).
func (q *queue) watch(ctx context.Context, v verdict, dirWatch <-chan zk.Event) (held bool, ch <-chan zk.Event, err error) {
	if v.children {
		return false, dirWatch, nil
	}
	exists, st, ch, err := q.s.watchNode(ctx, q.dir+"/"+v.watch)
	switch {
	case err != nil || !exists:
		return false, nil, err
	case v.downgradable && st.Version > 0:
		return true, nil, nil
	}
	return false, ch, nil
}

// errSessionEnded reports a grant whose session ended before it was
// recorded; the waiter queues again.
var errSessionEnded = errors.New("zklock: the session ended during the grant")

// errTooSlow reports a grant that took longer than the lease time.
var errTooSlow = errors.New("zklock: the ensemble answered too late to grant a lease")

// grant turns p, found to hold the lock by a listing sent at start, into
// a lease. It returns errTooSlow, and keeps p, if the lease would have
// ended already.
func (q *queue) grant(ctx context.Context, p pending, token string, fence uint64, start time.Time) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		// The answer came after the caller gave up: do not hand it a lock.
		q.s.removeLater(p.path)
		return nil, dlock.NotObtained(err)
	}
	if span := q.span(); !time.Now().Before(lease.Validity(start, span)) {
		return nil, fmt.Errorf("%w: %w (%v after the listing; the lease time is %v)", dlock.ErrNotObtained, errTooSlow, time.Since(start), span)
	}
	n, h := newNode(ctx, q, p, token, fence, start)
	if err := q.s.register(n, h); err != nil {
		return nil, err
	}
	return h, nil
}

// remove deletes p now if the ensemble answers within ctx, and otherwise
// in the background.
func (q *queue) remove(ctx context.Context, p pending) {
	err := q.s.delete(ctx, p.path)
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrSessionExpired) {
		q.s.removeLater(p.path)
	}
}

// register records a granted node and its first hold, and starts
// confirming it. It returns ErrClosed if the Client has been closed (whose
// close deletes the node), and errSessionEnded if the node's session has
// ended.
func (s *Client) register(n *node, h *Lease) error {
	if !s.leases.Add(h) {
		n.mu.Lock()
		n.closing = true
		n.mu.Unlock()
		h.End(dlock.Lost(ErrClosed))
		return ErrClosed
	}
	s.mu.Lock()
	if s.id != n.session {
		// The session ended after the listing: sessionEnded has run, or is
		// about to, without this node.
		s.mu.Unlock()
		n.lose(ErrSessionExpired)
		return errSessionEnded
	}
	s.nodes[n] = struct{}{}
	s.owners[ownerKey{n.q.dir, n.token}] = n
	s.mu.Unlock()
	// The first confirmation is due a period after the request that
	// granted the lease was sent (its Until counts from that), not a
	// period from now: the grant's answer may have come late.
	first := time.Until(h.Until()) - (n.span() - n.period())
	s.renew.AddFirst(&n.entry, n.period(), max(first, 0))
	if h.Err() != nil { // ended already: make sure it is forgotten
		s.forget(n)
	}
	return nil
}

// forget stops confirming n and drops it from the session's records.
func (s *Client) forget(n *node) {
	s.renew.Remove(&n.entry)
	s.mu.Lock()
	delete(s.nodes, n)
	if k := (ownerKey{n.q.dir, n.token}); s.owners[k] == n {
		delete(s.owners, k)
	}
	s.mu.Unlock()
}

// heldBy returns the node on dir that owner holds in this session, or nil.
func (s *Client) heldBy(dir, owner string) *node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owners[ownerKey{dir, owner}]
}
