package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// ErrUpgrade is returned by the write side of an RWMutex when ctx carries
// a read lease of the same RWMutex (from Lease.Context, of this Client or
// another): the writer would wait for that reader, and the reader for the
// writer, for ever. It is dlock.ErrUpgrade.
var ErrUpgrade = dlock.ErrUpgrade

// An RWMutex is a reader/writer lock on one Redis deployment, identified
// by name: any number of readers, or one writer, hold it at a time.
//
// Every read lease is renewed on its own, so a reader that crashes frees
// its share within one TTL. A writer that waits announces its intent, and
// new readers are then refused until it has taken the lock or given up:
// a stream of overlapping readers cannot starve a writer. Readers that
// already hold keep holding. An intent lasts min(TTL, 2s) and is renewed
// while its writer waits, so a writer that crashes while waiting holds new
// readers back for at most that long. Waiters are woken when the writer or
// the last reader releases; the lock is not fair among writers.
//
// Fences come from the counter of the name's slot, bumped for every grant,
// read or write (and for Downgrade), so they strictly increase across all
// grants;
// a reader's fence therefore also tells which writers came before it.
//
// Neither side is reentrant: asking for the lock again through the Context
// of a lease of the same RWMutex returns ErrNotReentrant, or ErrUpgrade
// when a reader asks for the write side. Downgrade turns a write lease into
// a read lease without letting another writer in.
//
// The keys are dlock:{name}:writer (the writer's token), dlock:{name}:readers
// and dlock:{name}:wintent (sorted sets of tokens by expiry in server
// milliseconds), and dlock:{name}, which marks the name as an RWMutex's
// while either side is held: if it goes behind the lock's back (deleted,
// evicted), every hold goes with it, as a Mutex's does with its key, and
// the next renewal ends each lease with dlock.ErrTakenOver. Fences come
// from the counter of the name's slot. Every key expires with the last
// lease (intents within min(TTL, 2s) of their writer's last attempt). While the RWMutex is held, a lock of
// another kind on the name gets an error matching dlock.ErrKindMismatch,
// from Lock as from TryLock.
type RWMutex struct {
	c                             *Client
	name                          string
	base, writer, readers, intent string
	fence, channel                string
	cfg                           config
	ttl                           string // cfg.ttl in milliseconds
	intentTTL                     time.Duration
	intentPX                      string
	err                           error
	readEv, writeEv               *lease.Events // nil without an observer
}

// NewRWMutex returns the reader/writer lock called name. It never fails: a
// bad name or option is reported by the first Lock, TryLock or Downgrade.
func (c *Client) NewRWMutex(name string, opts ...Option) *RWMutex {
	k := keysFor(name)
	rw := &RWMutex{c: c, name: name, base: k.lock, writer: k.lock + ":writer", readers: k.lock + ":readers",
		intent: k.lock + ":wintent", fence: k.fence, channel: k.channel, cfg: newConfig(opts),
		readEv: lease.NewEvents(c.obs, "redislock", name, "RWMutex.read"), writeEv: lease.NewEvents(c.obs, "redislock", name, "RWMutex.write")}
	rw.ttl = strconv.FormatInt(ttlMillis(rw.cfg.ttl), 10)
	// A waiting writer's intent outlives it by at most this much.
	rw.intentTTL = min(rw.cfg.ttl, 2*time.Second)
	rw.intentPX = strconv.FormatInt(ttlMillis(rw.intentTTL), 10)
	if err := rw.cfg.noBareKey("RWMutex"); err != nil {
		rw.err = err
	} else if err := checkName(name); err != nil {
		rw.err = err
	} else if err := rw.cfg.check(); err != nil {
		rw.err = err
	}
	return rw
}

// Name returns the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// Reader returns the read side: its leases share the lock with other
// readers.
func (rw *RWMutex) Reader() dlock.Locker { return rwSide{rw, true} }

// Writer returns the write side: its leases hold the lock alone.
func (rw *RWMutex) Writer() dlock.Locker { return rwSide{rw, false} }

// Downgrade turns writeLease, a held write lease of rw, into a read lease
// in one step: no other writer can take the lock in between, and waiting
// readers are woken. writeLease ends, with dlock.ErrReleased, as Downgrade
// sends its request: from then on a waiting reader may be granted, so the
// write lease must not be trusted any more, whatever the outcome. If it
// had been lost, Downgrade returns an error matching dlock.ErrNotHeld. If
// the outcome is unknown (the reply was lost), Downgrade returns the error
// and no lease, and gives up in the background both the write lock and
// the read share the request may have left. An observer sees the write
// lease released and an acquisition of the read side (EventAcquiring,
// then EventAcquired or EventNotAcquired).
func (rw *RWMutex) Downgrade(ctx context.Context, writeLease dlock.Lease) (dlock.Lease, error) {
	a := rw.readEv.Begin(ctx)
	return a.End(rw.downgrade(ctx, writeLease))
}

func (rw *RWMutex) downgrade(ctx context.Context, writeLease dlock.Lease) (dlock.Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	if err := rw.c.usable(); err != nil {
		return nil, err
	}
	w, ok := writeLease.(*rwLease)
	if !ok || w.read || w.rw.writer != rw.writer {
		return nil, fmt.Errorf("redislock: Downgrade of %q needs a write lease of the same RWMutex", rw.name)
	}
	if ended, err := w.Ended(false); ended {
		return nil, err
	}
	token := dlock.NewToken()
	if !w.End(dlock.ErrReleased) {
		_, err := w.Ended(false)
		return nil, err
	}
	start := time.Now()
	v, err := rw.c.eval(ctx, redisscript.RWDowngradeCall{Writer: rw.writer, Readers: rw.readers, Fence: rw.fence, Main: rw.base,
		Token: w.Token(), Reader: token, TTL: rw.ttl, Channel: rw.channel}.Call())
	if err != nil {
		if mayHaveRun(err) {
			// The write lock may or may not have become a read share:
			// give up both.
			rw.c.abandon(rw.releaseCall(false, w.Token()))
			rw.c.abandon(rw.releaseCall(true, token))
		}
		return nil, fmt.Errorf("redislock: Downgrade of %q did not complete; the write lease has ended, and whatever the request left is given up in the background: %w",
			rw.name, describe(rw.writer, redisscript.RWDowngrade, err))
	}
	n, _ := v.(int64)
	if n <= 0 {
		return nil, fmt.Errorf("redislock: Downgrade of %q: %w", rw.name, lease.NotHeld(dlock.Lost(dlock.ErrTakenOver)))
	}
	l, err := rw.grant(ctx, true, token, uint64(n), start)
	if l == nil {
		return nil, err
	}
	return l, err
}

// rwSide is one side of an RWMutex.
type rwSide struct {
	rw   *RWMutex
	read bool
}

// Name returns the RWMutex's name.
func (s rwSide) Name() string { return s.rw.name }

// events returns the side's Events.
func (s rwSide) events() *lease.Events {
	if s.read {
		return s.rw.readEv
	}
	return s.rw.writeEv
}

// TryLock makes one attempt. It returns an error matching
// dlock.ErrNotObtained if the lock is held on the other side, or, for a
// reader, if a writer is waiting, and one matching dlock.ErrUnavailable as
// Mutex.TryLock does.
func (s rwSide) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := s.events().Begin(ctx)
	return a.End(s.rw.c.leases.Call(ctx, s.tryLock))
}

func (s rwSide) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	l, _, err := s.attemptAs(ctx, "")
	if l == nil && err == nil {
		err = dlock.ErrNotObtained
	}
	if l == nil {
		return nil, s.rw.c.tryFailed(err)
	}
	return l, nil
}

// Lock waits for the lock as Mutex.Lock does. A waiting writer keeps new
// readers out until it takes the lock or gives up.
func (s rwSide) Lock(ctx context.Context) (dlock.Lease, error) {
	a := s.events().Begin(ctx)
	return a.End(s.rw.c.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.lock(ctx, &a) }))
}

func (s rwSide) lock(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	rw := s.rw
	intent := dlock.NewToken() // a waiting writer's identity in the intents
	announced := false         // a writer's intent may be on the server
	// late: a writer's attempt got no answer. Its call may reach the
	// server after the Lock has returned, however many answered attempts
	// came after it, and announce the intent again: the Lock then looks
	// for it again, granted or not.
	late := false
	var down outage
	defer func() {
		if announced {
			rw.withdraw(ctx, intent, down.last != nil)
		}
		if late {
			rw.c.lookAgain(rw.withdrawCall(intent))
		}
	}()
	var w *waiter
	won := false
	defer func() {
		if w != nil {
			w.close(won)
		}
	}()
	var idle pause.Timer
	defer idle.Stop()
	for n := 0; ; n++ {
		if err := rw.c.usable(); err != nil {
			return nil, err
		}
		l, wait, err := s.attemptAs(ctx, intent)
		if !s.read {
			announced = l == nil
			late = late || err != nil && mayHaveRun(err)
		}
		if l != nil || final(err) {
			won = l != nil
			if l == nil {
				return nil, err
			}
			return l, nil
		}
		down.note(err)
		if w == nil {
			// Subscribe, then try again at once: a release may have come
			// between the first attempt and the subscription.
			a.Waiting()
			w = rw.c.subs.wait(ctx, rw.channel, false)
			continue
		}
		backoff, ok := rw.cfg.retry.Backoff(n)
		if !ok {
			return nil, gaveUp(err)
		}
		if wait > 0 && wait < backoff {
			backoff = wait
		}
		if !s.read && backoff > rw.intentTTL/3 { // keep the intent alive
			backoff = rw.intentTTL / 3
		}
		if !idle.Wait(ctx, w.c, backoff) {
			return nil, down.interrupted(rw.c, ctx.Err(), err)
		}
	}
}

func (s rwSide) check(ctx context.Context) error {
	rw := s.rw
	if rw.err != nil {
		return rw.err
	}
	if err := rw.c.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	if l, ok := rw.c.leases.Held(ctx).(*rwLease); ok && l.Key() == rw.name {
		if l.read && !s.read {
			return ErrUpgrade
		}
		return ErrNotReentrant
	}
	return nil
}

// withdraw takes a writer's intent back after Lock gave up: at once, or in
// the background while the server fails (see Client.tidy).
func (rw *RWMutex) withdraw(ctx context.Context, intent string, failing bool) {
	call := rw.withdrawCall(intent)
	rw.c.tidy(ctx, failing, func(ctx context.Context) {
		// A failure leaves an intent that expires within intentTTL.
		rw.c.eval(ctx, call)
	})
}

// withdrawCall is the rw_withdraw call that takes a writer's intent back.
func (rw *RWMutex) withdrawCall(intent string) redisconn.Call {
	return redisscript.RWWithdrawCall{Intents: rw.intent, Intent: intent, Channel: rw.channel}.Call()
}

// attemptAs runs the acquire script once, with a fresh token. It returns
// a lease; or nil, how long until trying again makes sense, and possibly an
// error matching dlock.ErrNotObtained that says why; or a hard error. A
// writer with a non-empty intent leaves that intent on the server when not
// obtained, and withdraws it when obtained.
func (s rwSide) attemptAs(ctx context.Context, intent string) (*rwLease, time.Duration, error) {
	rw := s.rw
	token := lease.NewToken(ctx)
	acquire := redisscript.RWAcquireCall{Main: rw.base, Writer: rw.writer, Readers: rw.readers, Intents: rw.intent, Fence: rw.fence,
		Token: token, TTL: rw.ttl}
	if !s.read {
		px := "0"
		if intent != "" {
			px = rw.intentPX
		}
		owner, _ := dlock.OwnerFrom(ctx)
		acquire.Write = &redisscript.RWWriter{IntentLife: px, Intent: intent, Owner: owner}
	}
	call := acquire.Call()
	call.WaitReplicas, call.WaitTimeout = rw.cfg.replicas, rw.cfg.replicaTimeout
	start := time.Now()
	var res [1]redisconn.Result
	actx, cancel, own := bound(ctx, rw.cfg.replicaTimeout)
	defer cancel()
	rw.c.conn.Eval(actx, []redisconn.Call{call}, res[:])
	v, err := res[0].Val, res[0].Err
	if err != nil {
		if mayHaveRun(err) {
			rw.undo(s.read, token)
		}
		if isReply(err) && strings.Contains(err.Error(), "DLOCKUPGRADE") {
			return nil, 0, ErrUpgrade
		}
		return nil, 0, rw.c.failed(ctx, own, start, rw.base, call.Script, err)
	}
	n, ok := v.(int64)
	if !ok {
		return nil, 0, fmt.Errorf("redislock: acquire on %q: unexpected reply %T %v", rw.base, v, v)
	}
	if n <= 0 {
		return nil, time.Duration(-n+1) * time.Millisecond, nil
	}
	if rw.cfg.replicas > 0 && res[0].Replicas < int64(rw.cfg.replicas) {
		rw.undo(s.read, token)
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: the lock on %q reached %d of the %d replicas required within %v",
			rw.base, max(res[0].Replicas, 0), rw.cfg.replicas, rw.cfg.replicaTimeout))
	}
	if cause := cancelled(ctx, nil); cause != nil {
		rw.undo(s.read, token)
		return nil, 0, dlock.NotObtained(cause)
	}
	l, err := rw.grant(ctx, s.read, token, uint64(n), start)
	if err != nil {
		return nil, time.Millisecond, err
	}
	return l, 0, nil
}

// undo gives up, in the background, a share or write lock that an
// acquire with token may have taken.
func (rw *RWMutex) undo(read bool, token string) { rw.c.abandon(rw.releaseCall(read, token)) }

// releaseCall gives up a read share (read) or the write lock that token
// holds.
func (rw *RWMutex) releaseCall(read bool, token string) redisconn.Call {
	return redisscript.RWReleaseCall{Writer: rw.writer, Readers: rw.readers, Main: rw.base, Token: token, Channel: rw.channel, Read: read}.Call()
}

// grant makes the lease of a share or write lock taken at start, and
// registers and schedules it.
func (rw *RWMutex) grant(ctx context.Context, read bool, token string, fence uint64, start time.Time) (*rwLease, error) {
	until := lease.Validity(start, rw.cfg.ttl)
	if !time.Now().Before(until) {
		rw.undo(read, token)
		return nil, dlock.NotObtained(fmt.Errorf("redislock: acquiring %q took %v, longer than the TTL %v less the drift allowance",
			rw.base, time.Since(start), rw.cfg.ttl))
	}
	l := &rwLease{rw: rw, read: read}
	ev := rw.writeEv
	if read {
		ev = rw.readEv
	}
	l.State = lease.New(ctx, ev, rw.name, token, fence, until, l.forget)
	if rw.cfg.maxHold > 0 {
		l.CapHold(time.Now().Add(rw.cfg.maxHold))
	}
	l.entry.Value = l
	l.Start()
	if !rw.c.leases.Add(l) {
		rw.undo(read, token)
		l.End(dlock.Lost(ErrClosed))
		return nil, ErrClosed
	}
	if rw.cfg.renew {
		rw.c.renew.Add(&l.entry, rw.cfg.ttl/3)
	}
	if l.Err() != nil {
		l.forget()
	}
	if err := lease.Fresh(ctx, l, rw.cfg.ttl); err != nil {
		return nil, err
	}
	return l, nil
}

// An rwLease is a read share or the write lock of an RWMutex.
type rwLease struct {
	*lease.State
	rw    *RWMutex
	read  bool
	entry renewal.Entry
}

var _ dlock.Lease = (*rwLease)(nil)

func (l *rwLease) forget() {
	l.rw.c.renew.Remove(&l.entry)
	l.rw.c.leases.Remove(l)
	if l.MaxHoldReached() {
		l.rw.c.abandon(l.rw.releaseCall(l.read, l.Token()))
	}
}

// Refresh extends the lease to a full TTL from now.
func (l *rwLease) Refresh(ctx context.Context) error { return l.rw.c.refresh(ctx, l, l.rw.cfg.ttl) }

// Release gives up the share or the write lock, and wakes waiters when
// the lock became free.
func (l *rwLease) Release(ctx context.Context) error {
	if ended, err := l.BeginRelease(); ended {
		return err
	}
	call := l.rw.releaseCall(l.read, l.Token())
	start := time.Now()
	v, err := l.rw.c.eval(ctx, call)
	if err != nil {
		l.End(dlock.ErrReleased)
		if unfinished(err) {
			l.rw.c.abandon(call)
		}
		return l.rw.c.releaseFailed(start, l.Key(), call.Script, err)
	}
	if n, _ := v.(int64); n < 1 {
		l.End(dlock.Lost(dlock.ErrTakenOver))
		_, err := l.Ended(true)
		return err
	}
	return l.Released()
}

func (l *rwLease) refreshCall() redisconn.Call {
	return redisscript.RWRefreshCall{Writer: l.rw.writer, Readers: l.rw.readers, Main: l.rw.base, Token: l.Token(), TTL: l.rw.ttl, Read: l.read}.Call()
}

func (l *rwLease) renewed(r redisconn.Result, start, now time.Time) time.Time {
	return renewOutcome(l, r, redisscript.RWRefresh, lease.Validity(start, l.rw.cfg.ttl), now, l.rw.cfg.ttl/3)
}
