package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// ErrInvalidCount is returned, wrapped, by Latch.TrySetCount for a count
// below 1, and by every Latch call when the stored count is not a whole
// number of at least 0.
var ErrInvalidCount = errors.New("redislock: invalid latch count")

// A Latch is a count-down latch, as Redisson's RCountDownLatch: one party
// sets a count with TrySetCount, others count it down with CountDown, and
// any number of waiters, on any client, block in Wait until it reaches
// zero. At zero the latch is deleted and may be set again.
//
// On the server the count is the string dlock:{name}:count. It expires
// LatchLife after TrySetCount set it or CountDown last counted it: a latch
// left that long without a count is gone, as if it had reached zero, and
// its waiters return. Reaching
// zero is announced on the channel dlock:{name}:zero.
//
// A Latch holds no state of its own and is safe for concurrent use. It is
// not a lock: it does not claim its name, and a lock of the same name is
// another thing.
type Latch struct {
	c                     *Client
	name                  string
	countKey, zeroChannel string
	err                   error
}

// LatchLife is how long a latch's count lasts after TrySetCount set it or
// CountDown last counted it.
const LatchLife = 24 * time.Hour

var latchLifeMillis = strconv.FormatInt(LatchLife.Milliseconds(), 10)

// NewLatch returns the latch called name. It never fails: a bad name is
// reported by every call.
func (c *Client) NewLatch(name string) *Latch {
	base := keyPrefix + "{" + name + "}"
	return &Latch{c: c, name: name, countKey: base + ":count", zeroChannel: base + ":zero", err: checkName(name)}
}

// Name returns the latch's name.
func (l *Latch) Name() string { return l.name }

// TrySetCount sets the count to n, which must be at least 1, if the latch
// is not counting (its count is zero or was never set). It reports whether
// it set the count; false means another count is running.
func (l *Latch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if n < 1 {
		return false, fmt.Errorf("redislock: TrySetCount(%d) on latch %q: the count must be at least 1: %w", n, l.name, ErrInvalidCount)
	}
	// Setting the count claims the name for a Latch (see redisscript.loadClaiming).
	v, err := l.run(ctx, redisscript.LatchSetCall{Count: l.countKey, N: n, Life: latchLifeMillis}.Call())
	return v == 1, err
}

// CountDown decrements the count. The call that brings it to zero deletes
// the latch and wakes every waiter. Counting down a latch that is not
// counting does nothing. Each call counts once: if its reply is lost, it
// sends the same request again until the server answers, ctx is done or
// four minutes have passed, and the server counts a request only the
// first time it runs it. If no answer came, the error matches
// ErrOutcomeUnknown: the latch was counted down once or not at all.
func (l *Latch) CountDown(ctx context.Context) error {
	_, err := l.runOnce(ctx, redisscript.LatchCountDown, func(record, life string) redisconn.Call {
		return redisscript.LatchCountDownCall{Count: l.countKey, Record: record, Channel: l.zeroChannel, Life: latchLifeMillis, RecordLife: life}.Call()
	})
	return err
}

// Count returns the current count: 0 if the latch is not counting. If the
// server cannot be reached or cannot serve the call for now, the error
// matches dlock.ErrUnavailable, within AttemptTimeout, as TryLock's does.
func (l *Latch) Count(ctx context.Context) (int, error) {
	v, err := l.run(ctx, redisscript.LatchCountCall{Count: l.countKey}.Call())
	return int(v), err
}

// Wait blocks until the count is zero and returns nil; at once if the
// latch is not counting. It is woken by the notice of the CountDown that
// reaches zero, and checks the count again with backoff (DefaultRetry) in
// case a notice is lost, so a lost notice costs at most about half a
// second. Wait returns when it sees the count at zero: if the latch is set
// again at once after reaching zero, a waiter may see the new count and
// go on waiting. It waits through a server that cannot be reached or
// cannot serve it for now, as Mutex.Lock does. If ctx is done first, the
// error matches ctx.Err() and, if the server was still failing,
// dlock.ErrUnavailable.
func (l *Latch) Wait(ctx context.Context) error {
	var down outage
	// done returns Wait's error once ctx has ended with cause, or err.
	done := func(cause, err error) error {
		if cause == nil {
			return err
		}
		if down.last != nil {
			cause = fmt.Errorf("%w: %w", cause, l.c.unavailable(down.since, down.last))
		}
		return l.cancelled(cause)
	}
	n, err := l.Count(ctx)
	if !errors.Is(err, dlock.ErrUnavailable) && (err != nil || n == 0) {
		return err
	}
	down.note(err)
	w := l.c.subs.wait(ctx, l.zeroChannel, false)
	defer w.close(false)
	var idle pause.Timer
	defer idle.Stop()
	for attempt := 1; ; attempt++ {
		// Check again at once: zero may have come before the subscription.
		n, err := l.Count(ctx)
		if err == nil && n == 0 {
			return nil
		}
		if err != nil && !errors.Is(err, dlock.ErrUnavailable) {
			return done(cancelled(ctx, nil), err)
		}
		down.note(err)
		wait, _ := DefaultRetry.Backoff(attempt)
		if !idle.Wait(ctx, w.c, wait) {
			return done(ctx.Err(), nil)
		}
	}
}

// run runs a call of a latch script and returns its integer reply.
func (l *Latch) run(ctx context.Context, call redisconn.Call) (int64, error) {
	return l.call(ctx, call.Script, func(ctx context.Context) (any, error) {
		return l.c.eval(ctx, call)
	})
}

// runOnce is run for sc, a script that changes the count, whose call
// build returns: see Client.evalOnce.
func (l *Latch) runOnce(ctx context.Context, sc *redisscript.Script, build func(record, life string) redisconn.Call) (int64, error) {
	base := keysFor(l.name).lock
	return l.call(ctx, sc, func(ctx context.Context) (any, error) {
		return l.c.evalOnce(ctx, base, build)
	})
}

// call runs eval, a call of sc, and returns its integer reply.
func (l *Latch) call(ctx context.Context, sc *redisscript.Script, eval func(context.Context) (any, error)) (int64, error) {
	if l.err != nil {
		return 0, l.err
	}
	if err := l.c.usable(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, l.cancelled(err)
	}
	start := time.Now()
	v, err := eval(ctx)
	if err != nil {
		if errors.Is(err, ErrOutcomeUnknown) { // it says why, ctx's end included
			return 0, fmt.Errorf("redislock: %s on latch %q: %w", sc.Name, l.name, err)
		}
		// eval bounds the call by AttemptTimeout: a deadline error is
		// ctx's only if ctx has ended.
		if cause := ended(ctx, true, err); cause != nil && !isReply(err) {
			return 0, l.cancelled(cause)
		}
		if redisscript.Transient(err) || timedOut(err) {
			return 0, l.c.unavailable(start, l.describe(sc, err))
		}
		return 0, l.describe(sc, err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("redislock: %s on latch %q: unexpected reply %T %v", sc.Name, l.name, v, v)
	}
	return n, nil
}

func (l *Latch) cancelled(cause error) error {
	return fmt.Errorf("redislock: latch %q: %w", l.name, cause)
}

// describe names the problem behind a failed latch script.
func (l *Latch) describe(sc *redisscript.Script, err error) error {
	var re *redisconn.ReplyError
	if errors.As(err, &re) && strings.Contains(re.Msg, "DLOCKCOUNT") {
		return fmt.Errorf("redislock: latch %q: %s; something other than dlock wrote it: %w",
			l.name, strings.TrimPrefix(re.Msg, "DLOCKCOUNT "), ErrInvalidCount)
	}
	return describe(l.countKey, sc, err)
}
