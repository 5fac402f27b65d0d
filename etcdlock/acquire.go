package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A locker is what every kind of lock shares: its client, name, kind and
// options.
type locker struct {
	c    *Client
	name string
	kind kind
	n    int // a Semaphore's permits
	cfg  config
	ev   *lease.Events
}

func newLocker(c *Client, name string, k kind, n int, opts []Option) *locker {
	return &locker{c: c, name: name, kind: k, n: n, cfg: newConfig(opts), ev: lease.NewEvents(c.obs, "etcdlock", name, k.String())}
}

// A grant is one key of a lock and the etcd lease it lives on, from the
// moment it is queued: the watchdog keeps the etcd lease alive while the
// key waits, and while its Lease holds.
type grant struct {
	lk    *locker
	id    clientv3.LeaseID
	key   string
	token string
	span  time.Duration // how long a confirmation is good for
	entry renewal.Entry

	mu sync.Mutex
	// rev is the key's create revision: its place in the queue, and the
	// fence. It is set by enqueue, under mu since the watchdog may be
	// confirming the etcd lease already; zero until then.
	rev        int64
	confirmed  time.Time // the Until the last confirmation of the etcd lease gives
	fixedEnd   time.Time // a fixed lease's end; zero when renewed
	held       *Lease    // nil while waiting
	stopWait   context.CancelCauseFunc
	lostWaiter error  // why the etcd lease or key was found gone while waiting
	out        outage // what the renewals met of the cluster
}

// period returns how often the watchdog confirms the grant.
func (g *grant) period() time.Duration { return max(g.span/3, time.Millisecond) }

// attempt returns the context of one request of the grant's waits,
// renewals and release: a third of the period, and at least 100ms. A member
// that stopped answering (paused, cut off from the others) then holds up
// one attempt, and the next goes to the next endpoint. A connection that
// failed on every endpoint is tried again first (see reconnect).
func (g *grant) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	g.lk.c.reconnect()
	return context.WithTimeout(ctx, max(g.period()/3, 100*time.Millisecond))
}

// acquire is Lock (try false) and TryLock (try true) of every kind. Lock
// queues again after a grant that was given back for being too short (see
// lease.Fresh), and both queue again when the key was lost before it held
// (see requeue). TryLock waits at most tryTimeout for a cluster that does
// not answer, and no longer than it takes the client to find that no
// endpoint accepts a connection (see whenRefused), and then returns an
// error matching dlock.ErrUnavailable, not dlock.ErrNotObtained; a Lock
// whose ctx ends while the cluster fails returns one matching both, and
// ctx's error.
func (lk *locker) acquire(ctx context.Context, try bool, a *lease.Attempt) (dlock.Lease, error) {
	return lk.acquireWith(ctx, &call{try: try}, a)
}

// acquireWith is acquire of the call cl, which says whether it is a
// TryLock and what its key holds.
func (lk *locker) acquireWith(ctx context.Context, cl *call, a *lease.Attempt) (dlock.Lease, error) {
	if err := lk.check(ctx); err != nil {
		return nil, err
	}
	try := cl.try
	parent := ctx
	if try {
		var refused context.CancelCauseFunc
		ctx, refused = context.WithCancelCause(ctx)
		defer refused(nil)
		lk.c.whenRefused(ctx, min(lk.attemptTimeout(), refusedGrace), func() { refused(errRefused) })
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, tryTimeout(lk.cfg.ttl), errTryBound)
		defer cancel()
	}
	start := time.Now()
	l, err := lk.queue(ctx, cl, a)
	if err == nil {
		return l, nil
	}
	switch {
	case ended(parent) != nil:
		if o := cl.outage(); o.open() && errors.Is(err, dlock.ErrNotObtained) && !errors.Is(err, dlock.ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", err, lk.c.unavailable(o))
		}
	case try && (ended(ctx) != nil || errors.Is(err, dlock.ErrUnavailable)):
		// The bound ran out, or the retry strategy gave up, on a cluster
		// that does not answer: nobody knows whether the lock is held.
		o := cl.outage()
		if !o.open() {
			o = outage{since: start, last: noAnswer(time.Since(start))}
		}
		if cause := ended(ctx); errors.Is(cause, errRefused) {
			o.last = cause
		}
		return nil, fmt.Errorf("etcdlock: TryLock %q: %w", lk.name, lk.c.unavailable(o))
	}
	return nil, err
}

// queue makes attempts until one grants a lease, or fails for good.
func (lk *locker) queue(ctx context.Context, cl *call, a *lease.Attempt) (dlock.Lease, error) {
	if err := lk.checkServer(ctx, cl); err != nil {
		return nil, err
	}
	for {
		l, err := lk.attempt(ctx, cl, a)
		var rq *requeue
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &rq):
		case !cl.try && lease.IsShort(err):
		default:
			return nil, err
		}
		if cause := ended(ctx); cause != nil {
			if rq != nil {
				return nil, dlock.NotObtained(cause)
			}
			return nil, lease.Interrupted(cause, err)
		}
	}
}

// A requeue is the error of an attempt whose key was lost before it held
// the lock: its etcd lease expired (a cluster that was paused, or cut off
// from the client, for longer than the TTL), or the key was deleted. The
// caller queues again, at the back, as a new contender.
type requeue struct{ cause error }

func (e *requeue) Error() string { return "etcdlock: queue again: " + e.cause.Error() }
func (e *requeue) Unwrap() error { return e.cause }

// attempt queues once, and waits unless it is a TryLock.
func (lk *locker) attempt(ctx context.Context, cl *call, a *lease.Attempt) (dlock.Lease, error) {
	g, rs, err := lk.enqueue(ctx, cl)
	if err != nil {
		return nil, err
	}
	cl.g = g
	err = g.otherSize(rs)
	var v verdict
	if err == nil {
		v, err = g.judge(rs)
	}
	if err == nil && !v.held {
		// TryLock gives up, and so does a Lock that finds another kind of
		// lock holding the name: it does not wait for it.
		if err = g.busy(rs); !cl.try && !errors.Is(err, ErrKindMismatch) {
			a.Waiting()
			err = g.wait(ctx, cl)
		}
	}
	if err != nil {
		g.abandon(ctx, cl)
		return nil, err
	}
	l, err := g.grantLease(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := lease.Fresh(ctx, l, g.span); err != nil {
		return nil, err
	}
	return l, nil
}

// check refuses an attempt that cannot be made: a closed client, a bad
// name or option, re-entry, a done ctx.
func (lk *locker) check(ctx context.Context) error {
	if lk.c.reg.Closed() {
		return ErrClosed
	}
	if err := checkName(lk.name); err != nil {
		return err
	}
	if err := lk.cfg.check(); err != nil {
		return err
	}
	if lk.kind == kindPermit && lk.n < 1 {
		return fmt.Errorf("etcdlock: semaphore %q: NewSemaphore(n = %d): n must be at least 1", lk.name, lk.n)
	}
	if lk.kind != kindPermit {
		// Under a lease of another kind of lock on the name, the name's
		// oldest key refuses it (ErrKindMismatch).
		if h, ok := lk.c.reg.Held(ctx).(*Lease); ok && h.Key() == lk.name && h.g.lk.kind.lockKind() == lk.kind.lockKind() {
			if lk.kind == kindWrite && h.g.lk.kind == kindRead {
				return ErrUpgrade
			}
			return ErrNotReentrant
		}
	}
	if ctx.Err() != nil {
		return dlock.NotObtained(context.Cause(ctx))
	}
	return nil
}

// enqueue grants an etcd lease and puts the grant's key on it, in one
// transaction with the reads that say whether it holds at once, which it
// returns. Each request is an attempt (see retry).
func (lk *locker) enqueue(ctx context.Context, cl *call) (*grant, []*pb.ResponseOp, error) {
	cli := lk.c.cli
	secs := max(int64(math.Ceil(lk.cfg.ttl.Seconds())), 1)
	var start time.Time
	var gr *clientv3.LeaseGrantResponse
	err := lk.retry(ctx, cl, func(actx context.Context) (err error) {
		start = time.Now()
		gr, err = cli.Grant(actx, secs)
		return err
	})
	if err != nil {
		return nil, nil, failed(ctx, "granting an etcd lease for", lk.name, err)
	}
	g := &grant{lk: lk, id: gr.ID, key: keyFor(lk.name, lk.kind, lk.n, gr.ID), token: lease.NewToken(ctx)}
	g.span = min(lk.cfg.ttl, time.Duration(gr.TTL)*time.Second)
	g.confirmed = lease.Validity(start, g.span)
	g.entry.Value = g
	lk.c.sched.Add(&g.entry, g.period())

	// A put whose answer was lost is found again by the Else branch.
	value := g.token
	if cl.value != nil {
		value = *cl.value
	}
	ops := append([]clientv3.Op{clientv3.OpPut(g.key, value, clientv3.WithLease(g.id))}, lk.probe(0)...)
	var resp *clientv3.TxnResponse
	err = lk.retry(ctx, cl, func(actx context.Context) (err error) {
		start = time.Now()
		resp, err = cli.Txn(actx).If(clientv3.Compare(clientv3.CreateRevision(g.key), "=", 0)).
			Then(ops...).Else(clientv3.OpGet(g.key)).Commit()
		return err
	})
	if err != nil {
		g.abandon(ctx, cl)
		if leaseNotFound(err) && ended(ctx) == nil {
			// The etcd lease expired before the key was put on it.
			return nil, nil, &requeue{fmt.Errorf("etcdlock: queueing for %q: %w", lk.name, ErrLeaseNotFound)}
		}
		return nil, nil, failed(ctx, "queueing for", lk.name, err)
	}
	g.mu.Lock()
	g.fixedEnd = lease.Validity(start, lk.cfg.ttl)
	if resp.Succeeded {
		g.rev = resp.Header.Revision
	}
	g.mu.Unlock()
	if resp.Succeeded {
		return g, resp.Responses[1:], nil
	}
	// Created by an attempt whose answer was lost: ask again, knowing its
	// revision.
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || string(kvs[0].Value) != value {
		g.abandon(ctx, cl)
		return nil, nil, fmt.Errorf("etcdlock: queueing for %q: key %s is not this attempt's", lk.name, g.key)
	}
	g.mu.Lock()
	g.rev = kvs[0].CreateRevision
	g.mu.Unlock()
	err = lk.retry(ctx, cl, func(actx context.Context) (err error) {
		resp, err = cli.Txn(actx).If(clientv3.Compare(clientv3.CreateRevision(g.key), "=", g.rev)).Then(lk.probe(g.rev)...).Commit()
		return err
	})
	if err == nil && !resp.Succeeded {
		// The key went with its etcd lease meanwhile.
		g.abandon(ctx, cl)
		return nil, nil, &requeue{fmt.Errorf("etcdlock: queueing for %q: key %s: %w", lk.name, g.key, ErrLeaseNotFound)}
	}
	if err != nil {
		g.abandon(ctx, cl)
		return nil, nil, failed(ctx, "queueing for", lk.name, err)
	}
	return g, resp.Responses, nil
}

// retry runs f, each time with a context of its own for one attempt (an
// etcd lease time's ninth, at least 100ms), until it succeeds, fails with
// an error that is not transient, ctx ends, or the retry strategy gives
// up. A member that stopped answering (paused, cut off from the others)
// holds up one attempt, and the next goes to the next endpoint; a
// connection that failed on every endpoint is tried again first (see
// reconnect). An attempt
// whose time ran out failed for that, whatever its error says: a server
// that finds the deadline passed before the client does answers "Unknown:
// context deadline exceeded". Deadlines, the attempt's and ctx's, are read
// from the clock, since on a loaded machine the timer that cancels a
// context may not have run yet: once ctx's has passed, retry returns an
// error matching dlock.ErrNotObtained and context.DeadlineExceeded.
//
// retry records in cl what the attempts met: failed attempts, and an
// attempt that ctx cut short after it had waited a second, or its whole
// time, without an answer. When the strategy gives up, the error matches
// dlock.ErrNotObtained and dlock.ErrUnavailable.
func (lk *locker) retry(ctx context.Context, cl *call, f func(context.Context) error) error {
	timeout := lk.attemptTimeout()
	for failures := 1; ; failures++ {
		lk.c.reconnect()
		start := time.Now()
		deadline := start.Add(timeout)
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := f(actx)
		late := actx.Err() != nil || !time.Now().Before(deadline)
		cancel()
		if err == nil {
			cl.out.answered()
			return nil
		}
		if cause := ended(ctx); cause != nil {
			if waited := time.Since(start); waited >= min(timeout, time.Second) {
				cl.out.failed(start, noAnswer(waited))
			}
			return dlock.NotObtained(cause)
		}
		if !late && !transient(err) {
			return err
		}
		cl.out.failed(start, err)
		d, ok := lk.cfg.retry.Backoff(failures)
		if !ok {
			return dlock.NotObtained(fmt.Errorf("the retry strategy gave up: %w", lk.c.unavailable(cl.out)))
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return dlock.NotObtained(context.Cause(ctx))
		}
	}
}

// attemptTimeout is how long one request of a wait may take: an etcd
// lease time's ninth, at least 100ms.
func (lk *locker) attemptTimeout() time.Duration { return max(lk.cfg.ttl/9, 100*time.Millisecond) }

// probe returns the read that tells whether the key created at rev holds
// the lock, and if not what to wait for: the keys under the name's prefix
// created up to rev, oldest first, without their values; rev 0 means the
// key was created in the same transaction, so that every other key is
// older. The keys of another lock whose name extends this one ("name/b"
// beside "name") are under the prefix too: keys reads past them.
func (lk *locker) probe(rev int64) []clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	if rev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(rev))
	}
	return []clientv3.Op{clientv3.OpGet(prefix(lk.name), opts...)}
}

// keys returns, oldest first, the keys of the lock among the answer of
// probe: a key of another shape (that of the lock "name/b", or one no
// lock writes) holds nothing here, and is left out.
func (g *grant) keys(rs []*pb.ResponseOp) []*mvccpb.KeyValue {
	var own []*mvccpb.KeyValue
	for _, kv := range rs[0].GetResponseRange().Kvs {
		if k, _ := parseKey(g.lk.name, string(kv.Key)); k != kindOther {
			own = append(own, kv)
		}
	}
	return own
}

// A verdict is what a probe found: the key holds, or it waits for the
// deletion of key (of any key under the prefix, if prefix).
type verdict struct {
	held   bool
	key    string
	prefix bool
}

// judge reads the answer of probe (after the put, if first).
func (g *grant) judge(rs []*pb.ResponseOp) (verdict, error) {
	lk := g.lk
	g.mu.Lock()
	rev := g.rev
	g.mu.Unlock()
	var ahead []*mvccpb.KeyValue // the lock's keys created before this one
	for _, kv := range g.keys(rs) {
		if kv.CreateRevision < rev {
			ahead = append(ahead, kv)
		}
	}
	switch lk.kind {
	case kindMutex, kindWrite: // the key just ahead
		if len(ahead) == 0 {
			return verdict{held: true}, nil
		}
		return verdict{key: string(ahead[len(ahead)-1].Key)}, nil
	case kindRead: // the last key ahead that is not a reader's
		for i := len(ahead) - 1; i >= 0; i-- {
			if k, _ := parseKey(lk.name, string(ahead[i].Key)); k != kindRead {
				return verdict{key: string(ahead[i].Key)}, nil
			}
		}
		return verdict{held: true}, nil
	default: // kindPermit: it holds if fewer than n keys are ahead of it, and each is a permit of its semaphore
		held := len(ahead) < lk.n
		for _, kv := range ahead {
			if k, n := parseKey(lk.name, string(kv.Key)); k != kindPermit || n != lk.n {
				held = false // another kind of lock, or another semaphore, goes first
			}
		}
		if held {
			return verdict{held: true}, nil
		}
		return verdict{key: prefix(lk.name), prefix: true}, nil
	}
}

// otherSize is the error of a Semaphore's first look (the answers of
// probe after the put) that finds the name held by a semaphore of another
// number of permits, or nil. Once queued, a permit treats such a key as
// another kind of lock's (see judge): it waits for it if it is ahead.
func (g *grant) otherSize(rs []*pb.ResponseOp) error {
	own := g.keys(rs)
	if g.lk.kind != kindPermit || len(own) == 0 {
		return nil
	}
	if k, n := parseKey(g.lk.name, string(own[0].Key)); k == kindPermit && n != g.lk.n {
		return fmt.Errorf("etcdlock: semaphore %q has %d permits; this one asks for %d", g.lk.name, n, g.lk.n)
	}
	return nil
}

// busy is TryLock's error when the key does not hold at once: it matches
// dlock.ErrNotObtained, and dlock.ErrKindMismatch when the holder is
// another kind of lock.
func (g *grant) busy(rs []*pb.ResponseOp) error {
	if own := g.keys(rs); len(own) > 0 {
		k, _ := parseKey(g.lk.name, string(own[0].Key))
		if k.lockKind() != g.lk.kind.lockKind() {
			return fmt.Errorf("%w: etcdlock: a %s cannot take %q: it is held by a %s, and one name serves one kind of lock at a time: %w",
				dlock.ErrNotObtained, g.lk.kind, g.lk.name, k, ErrKindMismatch)
		}
	}
	return dlock.ErrNotObtained
}

// wait waits until the grant's key holds the lock: it asks which key it
// waits for (and that its own key is still there), and watches that key
// until it is deleted, again and again. Failed requests and broken
// watches are made again, as the retry strategy says, for as long as ctx
// lasts. If the key is found gone, or the watchdog finds it or its etcd
// lease gone, it returns a *requeue.
func (g *grant) wait(ctx context.Context, cl *call) error {
	lk := g.lk
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(lk.c.ctx, func() { cancel(ErrClosed) })
	defer stop()
	g.mu.Lock()
	if g.lostWaiter != nil {
		cancel(g.lostWaiter)
	}
	g.stopWait = cancel
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.stopWait = nil
		g.mu.Unlock()
	}()

	// over returns the error of a wait that wctx ended: ctx's end, the
	// Client's Close, or the loss of the key (queue again).
	over := func() error {
		if cause := ended(ctx); cause != nil {
			return dlock.NotObtained(cause)
		}
		cause := context.Cause(wctx)
		if errors.Is(cause, ErrClosed) || cause == nil {
			return dlock.NotObtained(ErrClosed)
		}
		return &requeue{fmt.Errorf("etcdlock: waiting for %q: %w", lk.name, cause)}
	}
	failures := 0
	retry := func(err error) error {
		if wctx.Err() != nil || ended(ctx) != nil {
			return over()
		}
		failures++
		d, ok := lk.cfg.retry.Backoff(failures)
		if !ok {
			if cl.out.open() {
				err = lk.c.unavailable(cl.out)
			}
			return dlock.NotObtained(fmt.Errorf("etcdlock: waiting for %q, the retry strategy gave up: %w", lk.name, err))
		}
		select {
		case <-time.After(d):
			return nil
		case <-wctx.Done():
			return over()
		}
	}
	for {
		start := time.Now()
		actx, cancel := g.attempt(wctx)
		resp, err := lk.c.cli.Txn(actx).If(clientv3.Compare(clientv3.CreateRevision(g.key), "=", g.rev)).Then(lk.probe(g.rev)...).Commit()
		cancel()
		if err != nil {
			if wctx.Err() == nil && ended(ctx) == nil {
				cl.out.failed(start, err)
			}
			if err := retry(err); err != nil {
				return err
			}
			continue
		}
		cl.out.answered()
		if !resp.Succeeded {
			return &requeue{fmt.Errorf("etcdlock: waiting for %q: the waiter's key %s is gone: %w", lk.name, g.key, ErrLeaseNotFound)}
		}
		v, err := g.judge(resp.Responses)
		if err != nil {
			return err
		}
		if v.held {
			g.mu.Lock()
			g.fixedEnd = lease.Validity(start, lk.cfg.ttl)
			g.mu.Unlock()
			return nil
		}
		if err := g.waitDelete(wctx, v, resp.Header.Revision+1); err != nil {
			if err := retry(err); err != nil {
				return err
			}
			continue
		}
		failures = 0
	}
}

// waitDelete watches v's key, from revision rev on, until it is deleted,
// or for one lease time at most: a watch on a member that stopped
// answering (paused, cut off from the others) may never deliver, and the
// caller asks again.
func (g *grant) waitDelete(ctx context.Context, v verdict, rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(rev), clientv3.WithFilterPut()}
	if v.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	poll := time.NewTimer(g.span)
	defer poll.Stop()
	wch := g.lk.c.cli.Watch(ctx, v.key, opts...)
	for {
		select {
		case <-poll.C:
			return nil
		case wr, ok := <-wch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return errors.New("etcdlock: watch closed")
			}
			if err := wr.Err(); err != nil {
				return err
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		}
	}
}

// abandon gives up a grant that will not hold: it stops its renewal and
// revokes its etcd lease, which deletes its key. It waits for the revoke
// (at most five seconds, or to the end of a TryLock's bound; after a
// Lock's ctx ended, one attempt at most), so that the next attempt does
// not find the key; a revoke that fails, and one of a call that met a
// cluster that fails or of a Client being closed, is made in the
// background instead, so as not to hold the caller up.
//
// A wait in a watch hears nothing of a cluster that went silent, and the
// renewal of the waiter's etcd lease may not be due yet: the revoke is
// then the Lock's first request to fail, and its failure is the call's
// outage, which the Lock's error reports.
func (g *grant) abandon(ctx context.Context, cl *call) {
	c := g.lk.c
	c.sched.Remove(&g.entry)
	limit := closeTimeout
	if d, ok := ctx.Deadline(); ok && cl.try {
		limit = min(limit, time.Until(d))
	}
	over := !cl.try && ended(ctx) != nil
	if over {
		limit = min(limit, max(g.period()/3, 100*time.Millisecond), time.Second)
	}
	if cl.outage().open() || c.ctx.Err() != nil || limit <= 0 || errors.Is(context.Cause(ctx), errRefused) {
		c.revokeLater(g.id)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	start := time.Now()
	if _, err := c.cli.Revoke(rctx, g.id); err != nil && !leaseNotFound(err) {
		if over && transient(err) {
			cl.out.failed(start, fmt.Errorf("revoking the waiter's etcd lease: %w", err))
		}
		c.revokeLater(g.id)
	}
}

// grantLease makes the Lease of a grant whose key holds the lock, unless
// the watchdog found its etcd lease or key gone meanwhile: it then gives
// the grant up and returns a *requeue, as a wait that the watchdog ends
// does.
func (g *grant) grantLease(ctx context.Context, cl *call) (dlock.Lease, error) {
	lk := g.lk
	l := &Lease{g: g}
	g.mu.Lock()
	if lost := g.lostWaiter; lost != nil {
		g.mu.Unlock()
		g.abandon(ctx, cl)
		return nil, &requeue{fmt.Errorf("etcdlock: queueing for %q: %w", lk.name, lost)}
	}
	until := g.confirmed
	if !lk.cfg.renew { // the end is fixed from now on, but by Refresh
		g.fixedEnd = minTime(g.fixedEnd, until)
		until = g.fixedEnd
	} else {
		g.fixedEnd = time.Time{}
	}
	l.State = lease.New(ctx, lk.ev, lk.name, g.token, uint64(g.rev), until, l.onEnd)
	if lk.cfg.maxHold > 0 {
		l.CapHold(time.Now().Add(lk.cfg.maxHold))
	}
	g.held = l
	l.Start()
	g.mu.Unlock()
	if !lk.c.reg.Add(l) {
		l.End(dlock.Lost(ErrClosed))
		return nil, ErrClosed
	}
	return l, nil
}

// confirm is the watchdog's work for one grant: it keeps the etcd lease
// alive and checks that the key is still there, and returns when to do so
// again (zero: never). Attempts (see attempt) go on until one gets through
// or the grant's Until has passed.
func (g *grant) confirm(ctx context.Context) time.Time {
	for {
		g.mu.Lock()
		l, until := g.held, g.confirmed
		g.mu.Unlock()
		if l != nil && (l.Releasing() || l.Err() != nil) {
			return time.Now().Add(g.period())
		}
		start := time.Now()
		rctx, cancel := g.attempt(ctx)
		next, err := g.check(rctx, start)
		late := rctx.Err() != nil
		cancel()
		if ctx.Err() == nil {
			g.mu.Lock()
			switch {
			case err == nil || !late && !transient(err):
				g.out.answered()
			default:
				g.out.failed(start, err)
			}
			g.mu.Unlock()
		}
		switch {
		case err == nil:
			g.extend(next)
			return start.Add(g.period())
		case errors.Is(err, ErrLeaseNotFound) || errors.Is(err, dlock.ErrTakenOver):
			g.lose(err)
			return time.Time{}
		case l != nil:
			l.RenewFailed(err)
		}
		if ctx.Err() != nil || time.Now().After(until) {
			return time.Now().Add(g.period())
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// check renews the etcd lease, by a request sent at start, and checks that
// the key is still there (once enqueue has put it). It returns the Until
// the renewal gives, or an error matching ErrLeaseNotFound or
// dlock.ErrTakenOver when the lease or the key is gone.
//
// The renewal counts only when a linearizable read made after it is
// answered in the raft term its own answer names (errTermChanged when
// not): a leader that was deposed while it could not hear its peers (a
// pause, a slow disk) answers renewals from its own lease table until it
// learns of its successor, which never saw them (etcd-io/etcd#15247;
// docs/ARCHITECTURE.md has the argument). The same table lacks the leases
// its successor granted meanwhile, so an answer that the etcd lease is
// gone counts only when the read finds the key gone too (errStaleNotFound
// when not), or, before the key is put, when it is in the same term.
func (g *grant) check(ctx context.Context, start time.Time) (time.Time, error) {
	cli := g.lk.c.cli
	ka, err := cli.KeepAliveOnce(ctx, g.id)
	gone := leaseNotFound(err) || (err == nil && ka.TTL <= 0)
	if err != nil && !gone {
		return time.Time{}, fmt.Errorf("etcdlock: renewing %q: %w", g.lk.name, err)
	}
	g.mu.Lock()
	rev := g.rev
	g.mu.Unlock()
	// A read-only transaction is linearizable only if it reads: etcd
	// serves one of compares alone from the member's own state.
	txn := cli.Txn(ctx)
	if rev != 0 { // queued: the key must still be there
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(g.key), "=", rev)}
		if gone { // and on this etcd lease, which is then not gone
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(g.key), "=", g.id))
		}
		txn = txn.If(cmps...)
	}
	resp, err := txn.Then(clientv3.OpGet(g.key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return time.Time{}, fmt.Errorf("etcdlock: checking %q: %w", g.lk.name, err)
	}
	switch {
	case gone && rev != 0 && resp.Succeeded:
		return time.Time{}, fmt.Errorf("etcdlock: renewing %q: %w", g.lk.name, errStaleNotFound)
	case gone && (rev != 0 || ka != nil && ka.RaftTerm == resp.Header.RaftTerm):
		return time.Time{}, ErrLeaseNotFound
	case gone:
		return time.Time{}, fmt.Errorf("etcdlock: renewing %q: %w (etcd lease reported gone, read in term %d)",
			g.lk.name, errTermChanged, resp.Header.RaftTerm)
	case !resp.Succeeded:
		return time.Time{}, fmt.Errorf("%w: key %s deleted", dlock.ErrTakenOver, g.key)
	case ka.RaftTerm != resp.Header.RaftTerm:
		return time.Time{}, fmt.Errorf("etcdlock: renewing %q: %w (renewed in term %d, read in term %d)",
			g.lk.name, errTermChanged, ka.RaftTerm, resp.Header.RaftTerm)
	}
	return lease.Validity(start, min(g.lk.cfg.ttl, time.Duration(ka.TTL)*time.Second)), nil
}

// errTermChanged is check's error when a renewal's answer cannot be
// trusted: the cluster's raft term moved between the renewal and the read
// that confirms it. The next try usually succeeds.
var errTermChanged = errors.New("the raft term changed since the renewal, which is not counted")

// errStaleNotFound is check's error when a member answered that the etcd
// lease is gone, but a linearizable read then found the key still on it:
// a deposed leader that does not know the lease yet. The next try usually
// succeeds.
var errStaleNotFound = errors.New("a member answered that the etcd lease is gone, but its key is still on it")

// unconfirmed reports whether err is check's error for an answer the
// cluster did not confirm, which a new renewal may.
func unconfirmed(err error) bool {
	return errors.Is(err, errTermChanged) || errors.Is(err, errStaleNotFound)
}

// extend records a confirmation good until until, and moves the Lease's
// Until to it (no further than a fixed lease's end).
func (g *grant) extend(until time.Time) {
	g.mu.Lock()
	if until.After(g.confirmed) {
		g.confirmed = until
	}
	l := g.held
	if !g.fixedEnd.IsZero() {
		until = minTime(until, g.fixedEnd)
	}
	g.mu.Unlock()
	if l != nil {
		l.Extend(until)
	}
}

// lose ends the grant, whose etcd lease or key is gone: its Lease with
// dlock.ErrLost wrapping cause, or its wait.
func (g *grant) lose(cause error) {
	g.mu.Lock()
	l := g.held
	if l == nil {
		g.lostWaiter = cause
		if g.stopWait != nil {
			g.stopWait(cause)
		}
	}
	g.mu.Unlock()
	if l != nil {
		l.Lose(dlock.Lost(cause))
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
