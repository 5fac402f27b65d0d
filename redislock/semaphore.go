package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// ErrInvalidPermits is returned, wrapped, by every call on a Semaphore made
// with permits below 1, by SetPermits below 1, by AddPermits when the
// limit would fall below 1, and when the stored limit is not a whole
// number of at least 1.
var ErrInvalidPermits = errors.New("redislock: a semaphore needs at least 1 permit")

// A Semaphore lets up to a limit of holders in at once, as Redisson's
// RPermitExpirableSemaphore: each Lock or TryLock takes one permit and
// returns a dlock.Lease for it, with its own token, fence and TTL. Permits
// are renewed by the client's watchdog like any lease (unless
// WithoutRenewal), and a permit whose holder crashed comes back when its
// lease expires. Releasing a permit wakes the waiters at once.
//
// On the server, the permits held are a sorted set, dlock:{name}:permits,
// of token to expiry (server time in milliseconds), the limit is the
// string dlock:{name}:limit, and dlock:{name} marks the name as a
// Semaphore's: if that goes behind the semaphore's back (deleted,
// evicted), every permit goes with it, as a Mutex's lease does with its
// key, and the next renewal ends each lease with dlock.ErrTakenOver.
// Fences come from the counter of the name's slot: every permit gets a
// fence greater than every earlier one, but holders of concurrent permits
// hold them at the same time, so a fence orders acquisitions, not
// exclusive holds. All three keys expire one TTL after the last permit's
// last renewal.
//
// The limit is stored on first use from the permits given to
// NewSemaphore. While stored, it wins: a Semaphore of the same name made
// with other permits uses the stored limit, and only SetPermits and
// AddPermits change it. Lowering the limit takes no permit away; it only
// keeps new ones from being granted until enough are released. A limit
// lives while permits are held and one TTL after the last (at least one
// TTL after SetPermits or AddPermits); then NewSemaphore's permits apply
// again.
//
// A Semaphore is not reentrant (a holder that asks again takes another
// permit, and may wait for one) and not fair. It holds no state of its own
// beyond its configuration and is safe for concurrent use. While permits
// are held, a lock of another kind on the name gets an error matching
// dlock.ErrKindMismatch, from Lock as from TryLock.
type Semaphore struct {
	m        *Mutex // the name, keys, configuration and leases' scripts
	permits  int
	limitKey string
}

var _ dlock.Locker = (*Semaphore)(nil)

// semaphoreFlavor gives a Semaphore's leases (grants of its inner Mutex)
// the permit scripts: refresh and release take the sorted set where the
// Mutex scripts take the lock key, and the limit and the name's main key
// beside it (Mutex.permit).
var semaphoreFlavor = &flavor{kind: "Semaphore", acquire: redisscript.SemaphoreAcquire,
	release: redisscript.SemaphoreRelease, refresh: redisscript.SemaphoreRefresh}

// NewSemaphore returns the semaphore called name with permits permits. It
// never fails: a bad name, option or number of permits is reported by
// every call. The options are those of a Mutex and apply to each permit:
// WithTTL (default DefaultTTL), WithoutRenewal, WithRetry and
// WithReplicas.
func (c *Client) NewSemaphore(name string, permits int, opts ...Option) *Semaphore {
	s := &Semaphore{m: c.newMutex(name, semaphoreFlavor, opts), permits: permits}
	base := keyPrefix + "{" + name + "}"
	s.m.keys.lock = base + ":permits"
	s.limitKey = base + ":limit"
	s.m.permit = &permitKeys{limit: s.limitKey, main: base}
	if s.m.err == nil && permits < 1 {
		s.m.err = fmt.Errorf("redislock: NewSemaphore(%q, %d): %w", name, permits, ErrInvalidPermits)
	}
	return s
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.m.name }

// TryLock makes one attempt to take a permit. It returns an error matching
// dlock.ErrNotObtained if none is free, and one matching
// dlock.ErrUnavailable as Mutex.TryLock does.
func (s *Semaphore) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := s.m.ev.Begin(ctx)
	return a.End(s.m.c.leases.Call(ctx, s.tryLock))
}

func (s *Semaphore) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	l, _, err := s.attempt(ctx)
	switch {
	case l != nil && err == nil:
		return l, nil
	case err == nil:
		err = dlock.ErrNotObtained
	}
	return nil, s.m.c.tryFailed(err)
}

// Lock takes a permit, waiting until one is free, ctx is done or the
// retry strategy gives up. A waiter is woken at once when a permit is
// released or the limit grows; otherwise it retries when the earliest
// permit expires or the retry strategy says so, whichever is first. If ctx
// is done first, the error matches both dlock.ErrNotObtained and
// ctx.Err(). It waits through an unavailable server as Mutex.Lock does.
func (s *Semaphore) Lock(ctx context.Context) (dlock.Lease, error) {
	a := s.m.ev.Begin(ctx)
	return a.End(s.m.c.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.lock(ctx, &a) }))
}

func (s *Semaphore) lock(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	m := s.m
	yield := time.Unix(0, m.yieldUntil.Load())
	polite := time.Now().Before(yield)
	var down outage
	var why error
	if !polite {
		l, _, err := s.attempt(ctx)
		if l != nil || final(err) {
			return asLease(l, err)
		}
		down.note(err)
		why = err
	}
	a.Waiting()
	w := m.c.subs.wait(ctx, m.keys.channel, false)
	won := false
	defer func() { w.close(won) }()
	if polite {
		select {
		case <-ctx.Done():
			return nil, dlock.NotObtained(ctx.Err())
		case <-w.c:
		case <-time.After(time.Until(yield)):
		}
	}
	var idle pause.Timer
	defer idle.Stop()
	for n := 1; ; n++ {
		if err := m.c.usable(); err != nil {
			return nil, err
		}
		l, expiry, err := s.attempt(ctx)
		if l != nil || final(err) {
			won = l != nil
			return asLease(l, err)
		}
		down.note(err)
		why = err
		wait, ok := m.cfg.retry.Backoff(n)
		if !ok {
			return nil, gaveUp(why)
		}
		if expiry > 0 && expiry < wait { // the earliest permit expires first (0: unknown)
			wait = expiry
		}
		if !idle.Wait(ctx, w.c, wait) {
			return nil, down.interrupted(m.c, ctx.Err(), why)
		}
	}
}

func (s *Semaphore) check(ctx context.Context) error {
	if s.m.err != nil {
		return s.m.err
	}
	if err := s.m.c.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	return nil
}

// attempt runs the acquire script once, with a fresh token. It returns a
// lease; or nil, the time until the earliest permit expires and possibly
// an error matching dlock.ErrNotObtained that says why; or a hard error.
// It follows Mutex.attempt step for step.
func (s *Semaphore) attempt(ctx context.Context) (*grant, time.Duration, error) {
	m := s.m
	token := lease.NewToken(ctx)
	start := time.Now()
	var res [1]redisconn.Result
	actx, cancel, own := bound(ctx, m.cfg.replicaTimeout)
	defer cancel()
	call := redisscript.SemaphoreAcquireCall{Permits: m.keys.lock, Limit: s.limitKey, Fence: m.keys.fence, Main: keysFor(m.name).lock,
		Token: token, TTL: m.ttl, Default: s.permits}.Call()
	call.WaitReplicas, call.WaitTimeout = m.cfg.replicas, m.cfg.replicaTimeout
	m.c.conn.Eval(actx, []redisconn.Call{call}, res[:])
	v, err := res[0].Val, res[0].Err
	if err != nil {
		if mayHaveRun(err) { // the script may have run without its reply reaching us
			m.c.abandon(m.releaseCall(token, token))
		}
		if f := m.c.failed(ctx, own, start, m.keys.lock, m.f.acquire, err); !isReply(err) || errors.Is(f, dlock.ErrUnavailable) {
			return nil, 0, f
		}
		return nil, 0, s.describe(m.f.acquire, err)
	}
	n, ok := v.(int64)
	if !ok {
		return nil, 0, fmt.Errorf("redislock: acquire on semaphore %q: unexpected reply %T %v", m.name, v, v)
	}
	if n <= 0 { // -n is the time until the earliest permit expires, in ms
		return nil, time.Duration(-n+1) * time.Millisecond, nil
	}
	giveBack := func() { m.c.release(context.WithoutCancel(ctx), m.releaseCall(token, token)) }
	if m.cfg.replicas > 0 && res[0].Replicas < int64(m.cfg.replicas) {
		giveBack()
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: the permit of %q reached %d of the %d replicas required within %v",
			m.keys.lock, max(res[0].Replicas, 0), m.cfg.replicas, m.cfg.replicaTimeout))
	}
	if cause := cancelled(ctx, nil); cause != nil {
		giveBack() // the caller has stopped waiting for it
		return nil, 0, dlock.NotObtained(cause)
	}
	until := lease.Validity(start, m.cfg.ttl)
	if !time.Now().Before(until) {
		giveBack()
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("redislock: acquiring a permit of %q took %v, longer than the TTL %v less the drift allowance",
			m.keys.lock, time.Since(start), m.cfg.ttl))
	}
	g := newGrant(ctx, m, token, token, uint64(n), until)
	if !m.c.leases.Add(g) {
		giveBack()
		g.End(dlock.Lost(ErrClosed))
		return nil, 0, ErrClosed
	}
	if m.cfg.renew {
		m.c.renew.Add(&g.entry, m.cfg.ttl/3)
	}
	if g.Err() != nil {
		g.forget()
	}
	if err := lease.Fresh(ctx, g, m.cfg.ttl); err != nil {
		return nil, time.Millisecond, err
	}
	return g, 0, nil
}

// SetPermits sets the limit to n, which must be at least 1, and wakes the
// waiters if it grew. Permits held beyond a lowered limit are not taken
// away; no new one is granted until the number held falls below it. A
// lost reply is handled as by AddPermits.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("redislock: SetPermits(%d) on semaphore %q: %w", n, s.m.name, ErrInvalidPermits)
	}
	_, err := s.changeLimit(ctx, false, n)
	return err
}

// AddPermits changes the limit by delta, which may be negative, and wakes
// the waiters if it grew. The resulting limit must be at least 1: a change
// that would leave less is refused with an error matching
// ErrInvalidPermits, and the limit is left as it was. If no limit is
// stored yet, the change applies to the permits given to NewSemaphore.
// Each call changes the limit once: if its reply is lost, it sends the same
// request again until the server answers, ctx is done or four minutes have
// passed, and the server applies a request only the first time it runs
// it. If no answer came, the error matches ErrOutcomeUnknown: the limit
// was changed once or not at all.
func (s *Semaphore) AddPermits(ctx context.Context, delta int) error {
	_, err := s.changeLimit(ctx, true, delta)
	return err
}

func (s *Semaphore) changeLimit(ctx context.Context, add bool, n int) (int64, error) {
	if err := s.admin(ctx); err != nil {
		return 0, err
	}
	sc := redisscript.SemaphoreLimit
	v, err := s.m.c.evalOnce(ctx, keysFor(s.m.name).lock, func(record, life string) redisconn.Call {
		return redisscript.SemaphoreLimitCall{Permits: s.m.keys.lock, Limit: s.limitKey, Record: record,
			Add: add, N: n, Default: s.permits, Channel: s.m.keys.channel, TTL: s.m.ttl, RecordLife: life}.Call()
	})
	if err != nil {
		return 0, s.describe(sc, err)
	}
	limit, _ := v.(int64)
	return limit, nil
}

// Available returns the number of permits free now: the limit less the
// permits held and not expired, or 0 if the limit was lowered below the
// number held.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	if err := s.admin(ctx); err != nil {
		return 0, err
	}
	sc := redisscript.SemaphoreAvailable
	v, err := s.m.c.eval(ctx, redisscript.SemaphoreAvailableCall{Permits: s.m.keys.lock, Limit: s.limitKey, Default: s.permits}.Call())
	if err != nil {
		return 0, s.describe(sc, err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("redislock: Available on semaphore %q: unexpected reply %T %v", s.m.name, v, v)
	}
	return int(max(n, 0)), nil
}

// admin is check for the calls that take no permit.
func (s *Semaphore) admin(ctx context.Context) error {
	if s.m.err != nil {
		return s.m.err
	}
	if err := s.m.c.usable(); err != nil {
		return err
	}
	return ctx.Err()
}

// describe names the problem behind a failed semaphore script.
func (s *Semaphore) describe(sc *redisscript.Script, err error) error {
	if errors.Is(err, ErrOutcomeUnknown) { // it says why
		return fmt.Errorf("redislock: %s on semaphore %q: %w", sc.Name, s.m.name, err)
	}
	var re *redisconn.ReplyError
	if errors.As(err, &re) {
		switch {
		case strings.Contains(re.Msg, "DLOCKLIMIT"):
			return fmt.Errorf("redislock: semaphore %q: %s: %w", s.m.name, strings.TrimPrefix(re.Msg, "DLOCKLIMIT "), ErrInvalidPermits)
		case strings.Contains(re.Msg, "WRONGTYPE"):
			return fmt.Errorf("redislock: semaphore %q: its keys (%s, %s, %s) must hold a sorted set and two numbers, but one holds a value of another Redis type (WRONGTYPE): another kind of dlock lock, or something else, uses this name; pick another name or delete the key: %w",
				s.m.name, s.m.keys.lock, s.limitKey, s.m.keys.fence, err)
		}
	}
	return describe(s.m.keys.lock, sc, err)
}
