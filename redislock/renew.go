package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// A renewable is a lease the client's watchdog renews. Every lock kind's
// lease implements it; renewBatch sends the refresh calls of a batch in one
// pipelined round trip.
type renewable interface {
	// refreshCall returns the script call that extends the lease.
	refreshCall() redisconn.Call
	// renewed applies the outcome of that call, sent at start, and returns
	// when to renew next, or the zero time to stop.
	renewed(r redisconn.Result, start, now time.Time) time.Time
	// Until is the lease's deadline.
	Until() time.Time
}

// renewBatch refreshes a batch of leases in one pipelined round trip.
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	calls := make([]redisconn.Call, len(batch))
	results := make([]redisconn.Result, len(batch))
	deadline := time.Now().Add(time.Minute)
	for i, e := range batch {
		r := e.Value.(renewable)
		calls[i] = r.refreshCall()
		if u := r.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// Waiting past the earliest deadline is pointless: that lease has ended.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	c.evalOrLeave(ctx, calls, results)
	now := time.Now()
	next := make([]time.Time, len(batch))
	for i, e := range batch {
		next[i] = e.Value.(renewable).renewed(results[i], start, now)
	}
	return next
}

// renewOutcome is the shared handling of a refresh reply for a lease whose
// refresh script returns 1 when extended and 0 when the lease is no longer
// held: extend with until (computed from the send time), end the lease, or
// retry soon after a transport failure. It returns the next renewal time.
func renewOutcome(st interface {
	Extend(time.Time) bool
	Lose(error) bool
	RenewFailed(error)
	Key() string
}, r redisconn.Result, s *redisscript.Script, until, now time.Time, period time.Duration) time.Time {
	switch {
	case r.Err == nil && r.Val == int64(1):
		if st.Extend(until) {
			return now.Add(period)
		}
	case r.Err == nil:
		lose(st, dlock.Lost(dlock.ErrTakenOver))
	case isReply(r.Err) && !turnedAway(r.Err):
		lose(st, dlock.Lost(describe(st.Key(), s, r.Err)))
	default:
		// Unreachable server, or one that cannot serve for now (a long
		// script, loading its data): try again soon; the lease ends by
		// itself at Until if no renewal gets through.
		st.RenewFailed(r.Err)
		return now.Add(period / 4)
	}
	return time.Time{}
}

// lose ends a lease that a renewal or refresh found lost, reporting the
// failed renewal first, unless its holder is releasing it: the release
// decides then (see lease.State.BeginRelease).
func lose(st interface{ Lose(error) bool }, err error) { st.Lose(err) }

// refreshable is a lease whose Refresh is its refresh call, run once.
type refreshable interface {
	renewable
	Key() string
	Ended(releasing bool) (bool, error)
	Lose(err error) bool
	Extend(until time.Time) bool
	RenewFailed(err error)
}

// refresh is Lease.Refresh for every kind: run l's refresh call now and
// extend l to the TTL from the send time, or end it if it is no longer held.
func (c *Client) refresh(ctx context.Context, l refreshable, ttl time.Duration) error {
	if ended, err := l.Ended(false); ended {
		return err
	}
	call := l.refreshCall()
	start := time.Now()
	v, err := c.eval(ctx, call)
	if err != nil {
		err = describe(l.Key(), call.Script, err)
		l.RenewFailed(err)
		return err
	}
	if v != int64(1) {
		lose(l, dlock.Lost(dlock.ErrTakenOver))
		_, err := l.Ended(false)
		return err
	}
	if !l.Extend(lease.Validity(start, ttl)) {
		_, err := l.Ended(false)
		return err
	}
	return nil
}

// evalOrLeave runs calls as Conn.Eval does, but returns when ctx is done
// even if the Conn has not: go-redis ends a call only at a deadline, and
// Close, which cancels the renewals under way, must not wait for a server
// that does not answer. The results are then ctx's error.
func (c *Client) evalOrLeave(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	done := make(chan struct{})
	own := make([]redisconn.Result, len(results))
	go func() {
		c.conn.Eval(ctx, calls, own)
		close(done)
	}()
	select {
	case <-done:
		copy(results, own)
	case <-ctx.Done():
		select {
		case <-done: // both at once: the replies say more
			copy(results, own)
			return
		default:
		}
		for i := range results {
			results[i] = redisconn.Result{Err: ctx.Err()}
		}
	}
}
