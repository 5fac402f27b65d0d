package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redisconn"
)

// ErrOutcomeUnknown is matched by the error of Semaphore.AddPermits,
// Semaphore.SetPermits and Latch.CountDown when the request may have run
// but no reply said so: the change was made once or not at all, and which
// is unknown (read the limit or the count to tell). Such a call sends its
// request again while the reply is lost, for at most four minutes (see
// "Calls that must run once" in the package doc) or until ctx is done;
// when ctx ends first, the error also matches ctx.Err().
var ErrOutcomeUnknown = errors.New("redislock: no reply: the change was made once or not at all")

// requestMemory is how long the server remembers the outcome of a call
// that must take effect once (see evalOnce): longer than a copy of the
// call can still arrive. A copy buffered by a paused server runs when it
// resumes; one sent into a partition is retransmitted by TCP for up to
// about 15 minutes (Linux's tcp_retries2) before its connection gives up.
var requestMemory = 20 * time.Minute

// resendFor is how long after its first copy a call that must take effect
// once is sent again: a copy sent later could arrive, retransmitted for
// 15 minutes, after the record of the first one expired, and make the
// change twice. It leaves a copy sent last 16 minutes before the record,
// which lives requestMemory from the first copy's run, expires.
var resendFor = 4 * time.Minute

// onceRetry spaces out the tries of a call whose outcome is unknown.
var onceRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// evalOnce runs a script that changes a count (a semaphore's limit, a
// latch's count), which must take effect exactly once. Each call gets a
// request id: the script records its outcome under base+":req:"+id for
// requestMemory and, run again with that id, returns the recorded outcome
// without acting. So when a reply is lost (a timeout, a reset connection),
// evalOnce sends the same request again until the server answers, ctx is
// done or resendFor has passed since the first copy: the change is made
// once however many copies run. Without an answer, the error matches
// ErrOutcomeUnknown if a copy may have run. An error reply to a later copy
// is an answer only if the script recorded it (see recorded): a copy that
// the server did not run for the moment (see unrun) is sent again, and
// after any other error reply the outcome is unknown.
//
// build returns the call, given the record's key and how long the
// record is kept (requestMemory), in milliseconds.
func (c *Client) evalOnce(ctx context.Context, base string, build func(record, life string) redisconn.Call) (any, error) {
	call := build(base+":req:"+dlock.NewToken(), strconv.FormatInt(requestMemory.Milliseconds(), 10))
	first := time.Now()
	ran := false // a copy may have run
	// unknown is the error of a call that got no answer: cause is why it
	// stopped (ctx, or resendFor passed), err the last copy's error.
	unknown := func(cause, err error, n int) error {
		if !ran { // no copy reached the server: nothing changed
			if errors.Is(err, cause) {
				return err
			}
			return fmt.Errorf("%w (the last try: %w)", cause, err)
		}
		took := time.Since(first).Round(time.Millisecond)
		if errors.Is(err, cause) {
			return fmt.Errorf("%w (the request was sent %d times over %v): %w", ErrOutcomeUnknown, n, took, err)
		}
		return fmt.Errorf("%w (the request was sent %d times over %v; the last try: %v): %w", ErrOutcomeUnknown, n, took, err, cause)
	}
	for n := 1; ; n++ {
		v, err := c.eval(ctx, call)
		if err == nil || isReply(err) && (!ran || recorded(err)) {
			return v, err
		}
		// An error reply to a later copy that the script did not record
		// tells nothing of the earlier copies: one may have made the
		// change. A copy the server did not run (BUSY, LOADING, ...) is
		// as good as lost; after any other, the outcome is unknown.
		if isReply(err) && !unrun(err) {
			return nil, unknown(err, err, n)
		}
		ran = ran || mayHaveRun(err)
		// eval bounds each copy by AttemptTimeout: a deadline error is
		// ctx's only if ctx has ended.
		if cause := ended(ctx, true, err); cause != nil {
			return nil, unknown(cause, err, n)
		}
		wait, _ := onceRetry.Backoff(n)
		if time.Since(first)+wait > resendFor {
			return nil, unknown(err, err, n)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, unknown(ctx.Err(), err, n)
		case <-t.C:
		}
	}
}

// recorded reports whether an error reply is an outcome that the scripts
// of evalOnce record under the request id (a refusal: DLOCK..., or a key
// of another type): every copy of the request gets the same.
func recorded(err error) bool {
	var re *redisconn.ReplyError
	return errors.As(err, &re) && (strings.HasPrefix(re.Msg, "DLOCK") || strings.HasPrefix(re.Msg, "WRONGTYPE dlock "))
}

// unrun reports whether an error reply says that the server did not run
// the script, for a while only: it is busy with another script, loading
// its data, or (a Cluster) moving the slot or without a master for it.
func unrun(err error) bool {
	var re *redisconn.ReplyError
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"BUSY ", "LOADING ", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "MOVED ", "ASK "} {
		if strings.HasPrefix(re.Msg, p) {
			return true
		}
	}
	return false
}
