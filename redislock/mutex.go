package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// A Mutex is an exclusive lock on one Redis deployment, identified by
// name. It is not reentrant: a goroutine that holds it and asks again
// through its lease's Context gets ErrNotReentrant, and one that asks
// through an unrelated context waits like anyone else. It is not fair:
// waiters are woken together and the fastest wins; see FairMutex.
//
// A Mutex holds no state of its own beyond its configuration; it is safe
// for concurrent use, and each Lock returns an independent Lease.
type Mutex struct {
	c    *Client
	name string
	keys keys
	cfg  config
	f    *flavor
	ttl  string // cfg.ttl in milliseconds, as sent to the server
	err  error
	ev   *lease.Events // nil without an observer
	// permit, for a Semaphore's inner Mutex, holds the keys beside the
	// permits (keys.lock) that a permit's release and refresh read.
	permit *permitKeys

	// yieldUntil (Unix ns) is set when a release of this name woke other
	// clients' waiters; until then, Lock lets them go first. It is the
	// Client's (see Client.yields).
	yieldUntil *atomic.Int64
}

// releaseYield is how long a Lock that follows its own release waits for a
// woken waiter of another client to take the lock: about one round trip on
// a local network. Without it, the releaser, already running, would win
// most hand-overs.
const releaseYield = time.Millisecond

var _ dlock.Locker = (*Mutex)(nil)

// A flavor is what tells one exclusive lock kind from another: its
// scripts, and whose token identifies a hold.
type flavor struct {
	kind                      string // recorded in the name's kind marker
	acquire, release, refresh *redisscript.Script
	// reentrant: the owner comes from the context (dlock.WithOwner, or a
	// lease's Context), and an owner may hold the lock more than once.
	reentrant bool
	// lined: waiting clients stand in a line (see acquire.lua), and a
	// release wakes the first of them alone.
	lined bool
}

var (
	plain = &flavor{kind: "Mutex", acquire: acquireScript, release: releaseScript, refresh: refreshScript, lined: true}
	// bare is a Mutex made WithBareKey: the lock key is the name itself,
	// its value the token alone (no waiter's mark), and its waiters poll.
	bare      = &flavor{kind: "Mutex", acquire: redisscript.BareAcquire, release: redisscript.BareRelease, refresh: refreshScript}
	reentrant = &flavor{kind: "ReentrantMutex", acquire: redisscript.ReentrantAcquire, release: redisscript.ReentrantRelease,
		refresh: redisscript.ReentrantRefresh, reentrant: true, lined: true}
)

// NewMutex returns the mutex called name. It never fails: a bad name or
// option is reported by Lock and TryLock.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	return c.newMutex(name, plain, opts)
}

func (c *Client) newMutex(name string, f *flavor, opts []Option) *Mutex {
	m := &Mutex{c: c, name: name, keys: keysFor(name), cfg: newConfig(opts), f: f,
		ev: lease.NewEvents(c.obs, "redislock", name, f.kind), yieldUntil: c.yieldFor(name)}
	m.ttl = strconv.FormatInt(ttlMillis(m.cfg.ttl), 10)
	check := checkName
	if m.cfg.bare {
		if f != plain {
			m.err = m.cfg.noBareKey(f.kind)
			return m
		}
		m.f, m.keys = bare, bareKeysFor(name)
		check = func(name string) error { return rediskeys.CheckBareKey("redislock", name) }
	}
	if err := check(name); err != nil {
		m.err = err
	} else if err := m.cfg.check(); err != nil {
		m.err = err
	}
	return m
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it, and, within
// AttemptTimeout, one matching dlock.ErrUnavailable if the server cannot
// be reached or does not answer.
func (m *Mutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	return a.End(m.c.leases.Call(ctx, m.tryLock))
}

func (m *Mutex) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	l, _, err := m.attempt(ctx, false, nil)
	switch {
	case l != nil && err == nil:
		return l, nil
	case err == nil:
		err = dlock.ErrNotObtained
	}
	return nil, m.c.tryFailed(err)
}

// Lock takes the lock, waiting until it is free, ctx is done or the retry
// strategy gives up. A waiter is woken at once when the holder releases;
// otherwise it retries when the holder's TTL runs out or the retry strategy
// says so, whichever is first. Waiting clients stand in a line kept next to
// the lock, and a release wakes the one that has waited longest, and one of
// its waiters, alone; while a client stands in line, its waiters retry on
// their own no sooner than 50ms apart (or the holder's TTL), since the
// release will tell them. If ctx is done first, the error matches both
// dlock.ErrNotObtained and ctx.Err().
func (m *Mutex) Lock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	return a.End(m.c.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.lock(ctx, &a) }))
}

func (m *Mutex) lock(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	yield := time.Unix(0, m.yieldUntil.Load())
	polite := time.Now().Before(yield)
	var down outage
	var why error // the last attempt's reason for not obtaining
	if !polite {
		l, _, err := m.attempt(ctx, false, nil)
		if l != nil || final(err) {
			return asLease(l, err)
		}
		down.note(err)
		why = err
	}
	a.Waiting()
	var w *waiter
	if m.f.lined {
		w = m.c.subs.waitQueued(ctx, m.keys.wake+m.c.id, m.leaveLine, m.passTurn)
	} else {
		w = m.c.subs.wait(ctx, m.keys.channel, true)
	}
	won := false
	defer func() { w.close(won) }()
	var idle pause.Timer
	defer idle.Stop()
	if polite {
		if wait, ok := m.join(ctx, w); ok {
			// In line behind the client this one's release woke, and
			// those before it: wait for the turn.
			if !idle.Wait(ctx, w.c, wait) {
				return nil, down.interrupted(m.c, ctx.Err(), why)
			}
		} else {
			select {
			case <-ctx.Done():
				return nil, dlock.NotObtained(ctx.Err())
			case <-w.c:
			case <-time.After(time.Until(yield)):
			}
		}
	}
	for n := 1; ; n++ {
		if err := m.c.usable(); err != nil {
			return nil, err
		}
		// Retry at once on the first round: a release may have come
		// between the first attempt and the subscription.
		wait, ok := m.cfg.retry.Backoff(n)
		ln := &line{w: w, life: max(wait, linePoll) + lineMargin}
		l, ttl, err := m.attempt(ctx, true, ln)
		if l != nil || final(err) {
			won = l != nil
			return asLease(l, err)
		}
		down.note(err)
		why = err
		if ln.in { // a release will say when it is this client's turn
			wait = max(wait, linePoll)
		}
		if !ok {
			return nil, gaveUp(why)
		}
		if ttl > 0 && ttl < wait { // the holder's key expires first (0: unknown)
			wait = ttl
		}
		if !idle.Wait(ctx, w.c, wait) {
			return nil, down.interrupted(m.c, ctx.Err(), why)
		}
	}
}

// final reports whether an attempt's error ends a Lock: every error but
// a busy lock's and an unavailable server's, and a lock of another kind
// holding the name, which Lock does not wait for (see
// dlock.ErrKindMismatch).
func final(err error) bool {
	return err != nil && (!errors.Is(err, dlock.ErrNotObtained) && !errors.Is(err, dlock.ErrUnavailable) ||
		errors.Is(err, dlock.ErrKindMismatch))
}

// asLease converts attempt's result, keeping a nil *grant from becoming a
// non-nil dlock.Lease.
func asLease(g *grant, err error) (dlock.Lease, error) {
	if g == nil {
		return nil, err
	}
	return g, err
}

func (m *Mutex) check(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if err := m.c.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	if !m.f.reentrant && m.c.heldKind(ctx, m.name, m.cfg.bare) == m.f.kind {
		return ErrNotReentrant
	}
	return nil
}

// heldKind returns the kind of lock ("Mutex", "FairMutex", "RWMutex",
// "Semaphore", "ReentrantMutex") of the lease of this client that ctx
// carries, if it holds name; otherwise "". A lock asked under the Context
// of a lease of its own kind would wait for itself; under another kind's,
// the server refuses it as it refuses another kind held by anyone
// (dlock.ErrKindMismatch). bare says whether the lock asked is made
// WithBareKey: a Mutex on the bare key name and one in dlock's layout on
// the same name lock different keys, and neither waits for the other.
func (c *Client) heldKind(ctx context.Context, name string, bare bool) string {
	switch l := c.leases.Held(ctx).(type) {
	case *grant:
		if l.Key() == name && l.m.cfg.bare == bare {
			return l.m.f.kind
		}
	case *fairLease:
		if l.Key() == name {
			return "FairMutex"
		}
	case *rwLease:
		if l.Key() == name {
			return "RWMutex"
		}
	}
	return ""
}

// attempt runs the acquire script once, with a fresh token. It returns a
// lease; or nil, the holder's remaining TTL and possibly an error matching
// dlock.ErrNotObtained that says why; or a hard error. A waiter (waited)
// takes the lock marked as awaited, so that its release wakes the next
// waiter: a release wakes one waiter per client, and the others, which
// did not try again, have not marked it.
func (m *Mutex) attempt(ctx context.Context, waited bool, ln *line) (*grant, time.Duration, error) {
	token := lease.NewToken(ctx)
	hold := token // a reentrant lock tells its holds apart by their own ids
	if m.f.reentrant {
		// The hold id is stored on the server; the owner token must not be.
		hold = dlock.NewToken()
		if owner, ok := dlock.OwnerFrom(ctx); ok {
			token = owner
		}
	}
	giveBack := m.releaseCall(token, hold)
	start := time.Now()
	var res [1]redisconn.Result
	args := redisscript.AcquireCall{Lock: m.keys.lock, Fence: m.keys.fence, Token: token, TTL: m.ttl, Hold: hold, Awaited: waited}
	if m.f.lined && ln != nil {
		since, onWin := ln.w.line()
		args.Line = &redisscript.LinePlace{Key: m.keys.waiting, Client: m.c.id, Since: since, LifeMillis: ttlMillis(ln.life), OnWin: onWin}
	}
	call := args.Call(m.f.acquire)
	call.WaitReplicas, call.WaitTimeout = m.cfg.replicas, m.cfg.replicaTimeout
	actx, cancel, own := bound(ctx, m.cfg.replicaTimeout)
	m.c.conn.Eval(actx, []redisconn.Call{call}, res[:])
	cancel()
	v, err := res[0].Val, res[0].Err
	if err != nil {
		// The script may have run without its reply reaching us: give
		// back what it may have taken (this hold only).
		if mayHaveRun(err) {
			m.c.abandon(giveBack)
		}
		return nil, 0, m.c.failed(ctx, own, start, m.keys.lock, m.f.acquire, err)
	}
	n, ok := v.(int64)
	if !ok {
		return nil, 0, fmt.Errorf("redislock: acquire on %q: unexpected reply %T %v", m.keys.lock, v, v)
	}
	if n <= 0 { // -n is the holder's remaining TTL in ms, rounded down
		if m.f.lined && ln != nil && n < 0 {
			ln.w.lined(true) // the script put the client in the line
			ln.in = true
		}
		return nil, time.Duration(-n+1) * time.Millisecond, nil
	}
	if m.cfg.replicas > 0 && res[0].Replicas < int64(m.cfg.replicas) {
		m.c.release(context.WithoutCancel(ctx), giveBack)
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: the lock on %q reached %d of the %d replicas required within %v",
			m.keys.lock, max(res[0].Replicas, 0), m.cfg.replicas, m.cfg.replicaTimeout))
	}
	if cause := cancelled(ctx, nil); cause != nil {
		// The reply came after the caller gave up (go-redis, unless
		// ContextTimeoutEnabled is set, does not bound I/O by ctx): do not
		// hand a lock to a caller that has stopped waiting for it.
		m.c.release(context.WithoutCancel(ctx), giveBack)
		return nil, 0, dlock.NotObtained(cause)
	}
	until := lease.Validity(start, m.cfg.ttl)
	if !time.Now().Before(until) {
		m.c.release(context.WithoutCancel(ctx), giveBack)
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: acquiring %q took %v, longer than the TTL %v less the drift allowance",
			m.keys.lock, time.Since(start), m.cfg.ttl))
	}
	g := newGrant(ctx, m, token, hold, uint64(n), until)
	if !m.c.leases.Add(g) {
		m.c.release(context.WithoutCancel(ctx), giveBack)
		g.End(dlock.Lost(ErrClosed))
		return nil, 0, ErrClosed
	}
	if m.cfg.renew {
		m.c.renew.Add(&g.entry, m.cfg.ttl/3)
	}
	if g.Err() != nil { // ended already: make sure it is forgotten
		g.forget()
	}
	if err := lease.Fresh(ctx, g, m.cfg.ttl); err != nil {
		return nil, time.Millisecond, err
	}
	return g, 0, nil
}

// releaseCall is the call that gives up the hold hold of owner token.
func (m *Mutex) releaseCall(token, hold string) redisconn.Call {
	if p := m.permit; p != nil { // a Semaphore's permit, whose hold is its token
		return redisscript.SemaphoreReleaseCall{Permits: m.keys.lock, Limit: p.limit, Main: p.main, Token: token, Channel: m.keys.channel}.Call()
	}
	return redisscript.ReleaseCall{Lock: m.keys.lock, Token: token, Channel: m.keys.channel, Hold: hold,
		Waiting: m.keys.waiting, Wake: m.keys.wake}.Call(m.f.release)
}

// permitKeys are the keys of a Semaphore beside its permits.
type permitKeys struct {
	limit string // the number of permits
	main  string // the name's main key, the marker =Semaphore
}

// A line is what a waiting attempt needs to stand in the lock's line of
// waiting clients: its waiter, and how long the line is kept for it (until
// a while after its next attempt).
type line struct {
	w    *waiter
	life time.Duration
	in   bool // the attempt failed and put the client in the line
}

// linePoll is the shortest time a waiter standing in the line waits
// before it tries again on its own: a release tells the first client in
// the line when the lock is free, so the retry strategy's poll is only a
// safety net for a notice that was lost. It is still cut short by the
// holder's TTL.

// lineMargin is how long a client's place in the line outlasts the time to
// its next attempt.
const lineMargin = time.Second

const linePoll = 50 * time.Millisecond

// join puts this client in the lock's line of waiting clients without
// trying to take the lock, for a Lock that follows a release of this
// client that woke another: it returns how long to wait for this client's
// turn before trying on its own (linePoll, or less if the holder's key
// expires first), and false if the line is not in use or could not be
// reached.
func (m *Mutex) join(ctx context.Context, w *waiter) (time.Duration, bool) {
	if !m.f.lined {
		return 0, false
	}
	since, _ := w.line()
	wait := linePoll
	call := redisscript.JoinLineCall{Lock: m.keys.lock, Waiting: m.keys.waiting, Client: m.c.id, Since: since,
		LifeMillis: ttlMillis(wait + lineMargin)}.Call()
	v, err := m.c.eval(ctx, call)
	pttl, ok := v.(int64)
	if err != nil || !ok {
		return 0, false
	}
	w.lined(true)
	if pttl > 0 {
		wait = min(wait, time.Duration(pttl+1)*time.Millisecond)
	}
	return wait, true
}

// passTurn wakes the next client in the lock's line, for a notice that
// found none of this client's waiters left to take the lock.
func (m *Mutex) passTurn() {
	if m.c.closing() { // the next client polls
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	call := redisscript.PassTurnCall{Lock: m.keys.lock, Waiting: m.keys.waiting, Wake: m.keys.wake}.Call()
	m.c.eval(ctx, call)
}

// leaveLine takes this client out of the lock's line of waiting clients,
// once: the last of its waiters gave up. If this fails, the next release
// may wake this client in vain, and the other waiters find the lock free
// at their next poll.
func (m *Mutex) leaveLine() {
	if m.c.closing() { // the client's place expires by itself
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	call := redisscript.LeaveLineCall{Waiting: m.keys.waiting, Client: m.c.id}.Call()
	m.c.eval(ctx, call)
}

// cancelled returns the context error behind a failed call, or nil. A
// transport may report the deadline slightly before ctx.Err() is set.
func cancelled(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) || errors.Is(err, context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return nil
}
