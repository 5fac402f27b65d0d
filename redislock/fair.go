package redislock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// MinFairWaiterTimeout is the shortest time a FairMutex's queue keeps a
// waiter that has stopped refreshing its place; see FairMutex.
const MinFairWaiterTimeout = 5 * time.Second

// A FairMutex is an exclusive lock that hands itself over in strict
// first-in, first-out order, as Redisson's RFairLock. Besides the lock key
// (the same string as a Mutex's), it keeps a queue of waiter tokens and
// each waiter's deadline in server time. A waiter joins the queue at its
// first failed attempt and takes the lock only when the lock is free and
// it is at the head of the queue; a release wakes the head waiter alone,
// on a channel of its own, so a hand-over costs the same few commands
// however many are waiting.
//
// A waiter renews its place whenever it retries, at least every third of
// its waiter timeout: the larger of the TTL and MinFairWaiterTimeout. A
// waiter that has not renewed for that long (its process died) is dropped
// when it reaches the head of the queue, so it delays the others by at
// most the waiter timeout. A waiter whose context is done leaves the queue
// at once.
//
// Under faults, FIFO holds for waiters whose Lock keeps running, as it
// does while the server cannot be reached: a head waiter granted the lock
// by an attempt whose reply came too late to use (the server was paused
// past the TTL), or never came, gives the grant back (in the background,
// when it never came) and keeps its place at the head. A waiter whose Lock
// returns an error has left the queue; calling Lock again joins it at the
// back. A waiter silent for its waiter timeout loses its place.
//
// TryLock does not jump the queue: it fails while anyone is waiting. Locks
// of other kinds on the same name do not respect the queue; a waiter that
// finds one of them holding the name leaves the queue and returns
// dlock.ErrKindMismatch. Each Lock
// returns an independent Lease; a FairMutex is safe for concurrent use.
type FairMutex struct {
	c      *Client
	name   string
	keys   keys
	queue  string // list of waiter tokens
	times  string // sorted set: waiter token -> deadline, server ms
	prefix string // a waiter's channel is prefix + its token
	cfg    config
	ttl    string
	wait   time.Duration // the waiter timeout
	waitMs string
	err    error
	ev     *lease.Events // nil without an observer
}

var _ dlock.Locker = (*FairMutex)(nil)

// NewFairMutex returns the fair mutex called name. It never fails: a bad
// name or option is reported by Lock and TryLock.
func (c *Client) NewFairMutex(name string, opts ...Option) *FairMutex {
	k := keysFor(name)
	m := &FairMutex{c: c, name: name, keys: k, queue: k.lock + ":queue", times: k.lock + ":timeouts",
		prefix: k.lock + ":w:", cfg: newConfig(opts), ev: lease.NewEvents(c.obs, "redislock", name, "FairMutex")}
	m.ttl = strconv.FormatInt(ttlMillis(m.cfg.ttl), 10)
	m.wait = max(m.cfg.ttl, MinFairWaiterTimeout)
	m.waitMs = strconv.FormatInt(ttlMillis(m.wait), 10)
	if err := m.cfg.noBareKey("FairMutex"); err != nil {
		m.err = err
	} else if err := checkName(name); err != nil {
		m.err = err
	} else if err := m.cfg.check(); err != nil {
		m.err = err
	}
	return m
}

// Name returns the lock's name.
func (m *FairMutex) Name() string { return m.name }

// fairToken returns a fresh token for a FairMutex. Its prefix, stored with
// it in the lock key, tells other kinds of lock that a FairMutex holds the
// name.
func fairToken(ctx context.Context) string { return "=FairMutex=" + lease.NewToken(ctx) }

func (m *FairMutex) check(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if err := m.c.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	if m.c.heldKind(ctx, m.name, false) == "FairMutex" {
		return ErrNotReentrant
	}
	return nil
}

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it or others are waiting, and
// one matching dlock.ErrUnavailable as Mutex.TryLock does.
func (m *FairMutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	return a.End(m.c.leases.Call(ctx, m.tryLock))
}

func (m *FairMutex) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	l, _, err := m.attempt(ctx, fairToken(ctx), nil)
	switch {
	case l != nil:
		return l, nil
	case err == nil:
		err = dlock.ErrNotObtained
	}
	return nil, m.c.tryFailed(err)
}

// Lock takes the lock, waiting in line until it is free and every earlier
// waiter has had it, ctx is done or the retry strategy gives up. A waiter
// is woken at once when it comes to the head of the queue and the lock is
// released; otherwise it retries when the holder's TTL runs out or the
// retry strategy says so, whichever is first. If ctx is done first, the
// error matches both dlock.ErrNotObtained and ctx.Err(), and the waiter
// has left the queue. It waits through an unavailable server as
// Mutex.Lock does.
func (m *FairMutex) Lock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	return a.End(m.c.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.lock(ctx, &a) }))
}

func (m *FairMutex) lock(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	token := fairToken(ctx) // the waiter's place in the queue; each attempt has its own
	var down outage
	l, _, err := m.attempt(ctx, token, nil)
	if l != nil || final(err) {
		return asFair(l, err)
	}
	down.note(err)
	a.Waiting()
	// Subscribe before joining the queue, so that no wake-up is missed.
	// The channel is this waiter's alone: unsubscribe it at once at the
	// end (close(true)) rather than let it linger.
	w := m.c.subs.wait(ctx, m.prefix+token, false)
	defer w.close(true)
	var idle pause.Timer
	defer idle.Stop()
	// An attempt that got no answer may reach the server after the Lock
	// has returned, however many answered attempts came after it: its
	// call renews the place, or takes the lock and has its clean-up give
	// the grant back and put the waiter back in line (while the Lock
	// goes on). So once such an attempt was made, the Lock looks for the
	// place again after it returns, granted or not, and gone tells the
	// clean-ups that the waiter has left the line.
	late := false
	gone := new(atomic.Bool)
	for n := 1; ; n++ {
		if err := m.c.usable(); err != nil {
			m.leave(ctx, token, down.last != nil, late, gone)
			return nil, err
		}
		l, wait, err := m.attempt(ctx, token, gone)
		if l != nil {
			if late {
				gone.Store(true)
				m.c.lookAgain(m.leaveCall(token))
			}
			return l, nil
		}
		late = late || err != nil && mayHaveRun(err)
		if final(err) {
			m.leave(ctx, token, down.last != nil, late, gone)
			return nil, err
		}
		down.note(err)
		backoff, ok := m.cfg.retry.Backoff(n)
		if !ok {
			m.leave(ctx, token, down.last != nil, late, gone)
			return nil, gaveUp(err)
		}
		if wait <= 0 { // the attempt failed, and said no wait
			wait = backoff
		}
		// Retrying renews the place in the queue: never let it lapse.
		wait = min(max(wait, time.Millisecond), backoff, m.wait/3)
		if !idle.Wait(ctx, w.c, wait) {
			m.leave(ctx, token, down.last != nil, late, gone)
			return nil, down.interrupted(m.c, ctx.Err(), err)
		}
	}
}

func asFair(l *fairLease, err error) (dlock.Lease, error) {
	if l == nil {
		return nil, err
	}
	return l, err
}

// leaveCall is the fair_leave call that takes waiter out of the queue.
func (m *FairMutex) leaveCall(waiter string) redisconn.Call {
	return redisscript.FairLeaveCall{Lock: m.keys.lock, Queue: m.queue, Deadlines: m.times, Waiter: waiter, Wake: m.prefix}.Call()
}

// leave takes token out of the queue, waking the next waiter if the lock
// is free: at once, or in the background while the server fails (see
// Client.tidy). If the server cannot be reached, the entry is dropped when
// its deadline passes. When late is set, an attempt of the waiter, which
// renews its place, was cut short and may reach the server after the
// leave (a loaded server reads another connection first): leave sets
// gone, so that the attempt's clean-up no longer puts the waiter back in
// line, and looks again (see Client.lookAgain), so that no place outlives the
// Lock.
func (m *FairMutex) leave(ctx context.Context, token string, failing, late bool, gone *atomic.Bool) {
	gone.Store(true)
	call := m.leaveCall(token)
	m.c.tidy(ctx, failing, func(ctx context.Context) {
		m.c.eval(ctx, call)
	})
	if late {
		m.c.lookAgain(call)
	}
}

// attempt runs the acquire script once for waiter, joining or renewing
// its place in the queue if gone is not nil (a Lock's waiter; gone is set
// once the Lock has returned). The lock is then taken with a token
// of the attempt's own, so that giving back what an attempt whose reply was
// lost may have taken never touches the grant of a later attempt of the
// same waiter. It returns a lease; or nil and how long to wait before the
// next attempt; or an error.
func (m *FairMutex) attempt(ctx context.Context, waiter string, gone *atomic.Bool) (*fairLease, time.Duration, error) {
	enqueue := gone != nil
	token := waiter
	if enqueue {
		token = fairToken(ctx)
	}
	start := time.Now()
	actx, cancel, own := bound(ctx, 0)
	v, err := m.c.eval(actx, redisscript.FairAcquireCall{Lock: m.keys.lock, Queue: m.queue, Deadlines: m.times, Fence: m.keys.fence,
		Waiter: waiter, TTL: m.ttl, Timeout: m.waitMs, Join: enqueue, Token: token}.Call())
	cancel()
	if err != nil {
		if mayHaveRun(err) {
			// The script may have run: give the lock back if this attempt
			// took it. A waiter keeps its place, at the head if this was
			// its turn, while its Lock goes on, and leaves the queue when
			// it ends; the request may land after that, and then the
			// grant goes to the next in line.
			if !enqueue {
				m.c.abandon(releaseCall(m.keys, token, releaseScript))
			} else {
				m.c.abandonWith(func() redisconn.Call {
					r := redisscript.FairReleaseCall{Lock: m.keys.lock, Queue: m.queue, Deadlines: m.times, Token: token, Wake: m.prefix}
					if !gone.Load() {
						r.Timeout, r.Waiter = m.waitMs, waiter
					}
					return r.Call()
				})
			}
		}
		return nil, 0, m.c.failed(ctx, own, start, m.keys.lock, redisscript.FairAcquire, err)
	}
	n, ok := v.(int64)
	if !ok {
		return nil, 0, fmt.Errorf("redislock: fair acquire on %q: unexpected reply %T %v", m.keys.lock, v, v)
	}
	if n <= 0 {
		return nil, time.Duration(-n+1) * time.Millisecond, nil
	}
	if cause := cancelled(ctx, nil); cause != nil {
		m.release(context.WithoutCancel(ctx), token)
		return nil, 0, dlock.NotObtained(cause)
	}
	until := lease.Validity(start, m.cfg.ttl)
	if !time.Now().Before(until) {
		// A waiter keeps its place: the grant was its turn.
		m.giveBack(context.WithoutCancel(ctx), token, waiter, enqueue)
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: acquiring %q took %v, longer than the TTL %v less the drift allowance",
			m.keys.lock, time.Since(start), m.cfg.ttl))
	}
	l := &fairLease{m: m}
	l.State = lease.New(ctx, m.ev, m.name, token, uint64(n), until, l.forget)
	if m.cfg.maxHold > 0 {
		l.CapHold(time.Now().Add(m.cfg.maxHold))
	}
	l.entry.Value = l
	l.Start()
	if !m.c.leases.Add(l) {
		m.release(context.WithoutCancel(ctx), token)
		l.End(dlock.Lost(ErrClosed))
		return nil, 0, ErrClosed
	}
	if m.cfg.renew {
		m.c.renew.Add(&l.entry, m.cfg.ttl/3)
	}
	if l.Err() != nil {
		l.forget()
	}
	if err := lease.Fresh(ctx, l, m.cfg.ttl); err != nil {
		return nil, time.Millisecond, err
	}
	return l, 0, nil
}

// release deletes the lock held by token and wakes the head waiter. It
// returns the script's reply. When the server cannot be reached, the key
// is deleted in the background (the head waiter then finds the lock free
// by its fallback poll) or expires within its TTL.
func (m *FairMutex) release(ctx context.Context, token string) (any, error) {
	return m.giveBack(ctx, token, "", false)
}

// giveBack is release; with requeue set, waiter, whose attempt took the
// lock with token, also goes back to the head of the queue, for a waiter
// that gives back a grant that came too late and keeps waiting: it keeps
// its place.
func (m *FairMutex) giveBack(ctx context.Context, token, waiter string, requeue bool) (any, error) {
	r := redisscript.FairReleaseCall{Lock: m.keys.lock, Queue: m.queue, Deadlines: m.times, Token: token, Wake: m.prefix}
	if requeue {
		r.Timeout, r.Waiter = m.waitMs, waiter
	}
	v, err := m.c.eval(ctx, r.Call())
	if err != nil && unfinished(err) {
		m.c.abandon(releaseCall(m.keys, token, releaseScript))
	}
	return v, err
}

// A fairLease is a FairMutex's lease.
type fairLease struct {
	*lease.State
	m     *FairMutex
	entry renewal.Entry
}

var _ dlock.Lease = (*fairLease)(nil)

func (l *fairLease) forget() {
	l.m.c.renew.Remove(&l.entry)
	l.m.c.leases.Remove(l)
	if l.MaxHoldReached() { // give the lock back, to the head of the queue
		l.m.c.abandon(redisscript.FairReleaseCall{Lock: l.m.keys.lock, Queue: l.m.queue, Deadlines: l.m.times, Token: l.Token(), Wake: l.m.prefix}.Call())
	}
}

// Refresh extends the lease to a full TTL from now.
func (l *fairLease) Refresh(ctx context.Context) error { return l.m.c.refresh(ctx, l, l.m.cfg.ttl) }

// Release deletes the lock if this lease still holds it and wakes the
// waiter at the head of the queue.
func (l *fairLease) Release(ctx context.Context) error {
	if ended, err := l.BeginRelease(); ended {
		return err
	}
	start := time.Now()
	v, err := l.m.release(ctx, l.Token()) // sent again in the background if unfinished
	if err != nil {
		l.End(dlock.ErrReleased)
		return l.m.c.releaseFailed(start, l.Key(), redisscript.FairRelease, err)
	}
	if n, _ := v.(int64); n < 1 {
		l.End(dlock.Lost(dlock.ErrTakenOver))
		_, err := l.Ended(true)
		return err
	}
	return l.Released()
}

func (l *fairLease) refreshCall() redisconn.Call {
	return redisscript.RefreshCall{Lock: l.m.keys.lock, Token: l.Token(), TTL: l.m.ttl}.Call(refreshScript)
}

func (l *fairLease) renewed(r redisconn.Result, start, now time.Time) time.Time {
	return renewOutcome(l, r, refreshScript, lease.Validity(start, l.m.cfg.ttl), now, l.m.cfg.ttl/3)
}
