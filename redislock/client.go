package redislock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// A Client makes locks on one Redis deployment. It owns the two things its
// locks share: one pub/sub connection that wakes waiters when a lock is
// released, and one renewal scheduler that renews every held lease in
// batches. Create one Client per deployment and share it; it is safe for
// concurrent use.
type Client struct {
	conn    Conn
	service string // names the deployment in errors (see dlock.UnavailableError)
	id      string // this client's name in lines of waiting clients (see Mutex.lock)
	err     error
	subs    *subscriber
	renew   *renewal.Scheduler
	obs     dlock.Observer // from WithObserver and WithLogger; nil for none

	leases lease.Registry

	cleanups background.Group // deletes keys that interrupted calls may have set

	closeOnce sync.Once
	closed    chan struct{} // closed when Close begins
	closeBy   time.Time     // when Close stops waiting for the server; set before closed is closed

	// yields[i] (Unix ns) is set when a release of a lock whose name
	// hashes to i woke other clients' waiters; until then, this client's
	// Locks of such names let them go first. Kept in the Client, not the
	// lock value, so that a NewMutex per call keeps it; a fixed table,
	// so that it needs no clean-up: two names that share a slot at worst
	// make one wait for a notice, or releaseYield.
	yields [256]atomic.Int64
}

// yieldFor returns the yield slot of the lock called name.
func (c *Client) yieldFor(name string) *atomic.Int64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return &c.yields[h.Sum32()%uint32(len(c.yields))]
}

// New returns a Client that talks to Redis through conn (see the
// goredisconn and rueidisconn packages), configured by opts (WithObserver,
// WithLogger). New never fails: a nil conn is reported by the first call
// that needs it.
func New(conn Conn, opts ...ClientOption) *Client {
	cfg := newClientConfig(opts)
	c := &Client{conn: conn, id: dlock.NewToken(), obs: lease.Observer(cfg.obs, cfg.log), closed: make(chan struct{})}
	if conn == nil {
		c.err = errors.New("redislock: New was given a nil Conn; wrap your client with goredisconn.New or rueidisconn.New")
		return c
	}
	c.service = service(conn)
	c.subs = newSubscriber(conn, c.closed)
	c.renew = renewal.New(c.renewBatch)
	return c
}

// closeWait bounds Close's wait for the server.
const closeWait = time.Second

// Close releases every lease the Client still holds, stops renewing,
// ends the clean-ups of interrupted calls (which delete what a failed or
// abandoned attempt may have taken), and closes the pub/sub connection. It
// waits for the server at most one second in all (closeWait): a lease
// whose release has not reached the server by then ends with an error
// matching dlock.ErrLost, its key expires within its TTL, and Close
// reports the failure. Each clean-up looks again after Close
// begins, within that second, and no more: a key that a request still on
// its way to the server may set expires within its TTL. A server that
// cannot be reached, or does not answer, so costs Close one second at
// most. It does not close the Conn's underlying Redis client. Every held
// lease released ends with dlock.ErrReleased.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	c.closeOnce.Do(func() {
		c.closeBy = time.Now().Add(closeWait)
		close(c.closed)
	})
	first, err := c.leases.Close(closeWait, ErrClosed)
	if !first {
		return nil
	}
	c.renew.Close()
	// Every clean-up ends by closeBy, at its last look: the margin is
	// for the goroutines to return on a loaded machine.
	if !c.cleanups.Finish(max(time.Until(c.closeBy), 0) + 500*time.Millisecond) {
		err = errors.Join(err, fmt.Errorf("redislock: Close: clean-ups of interrupted calls did not finish within %v; what they had to delete expires within its TTL", closeWait))
	}
	return errors.Join(err, c.subs.close())
}

// closing reports whether Close has begun.
func (c *Client) closing() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// closeBound returns ctx, bounded, once Close has begun, by the time
// Close gives the server.
func (c *Client) closeBound(ctx context.Context) (context.Context, context.CancelFunc) {
	if !c.closing() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, c.closeBy)
}

// usable returns the error every call on an unusable Client returns.
func (c *Client) usable() error {
	if c.err != nil {
		return c.err
	}
	if c.leases.Closed() {
		return ErrClosed
	}
	return nil
}

// eval runs one script call, bounded by AttemptTimeout. A call that ran
// out of that time fails with an error that says so, matching
// context.DeadlineExceeded, though ctx has not ended.
func (c *Client) eval(ctx context.Context, call redisconn.Call) (any, error) {
	ctx, cancel, _ := bound(ctx, 0)
	defer cancel()
	var res [1]redisconn.Result
	c.conn.Eval(ctx, []redisconn.Call{call}, res[:])
	return res[0].Val, res[0].Err
}

// abandon runs, in the background, the release call of what an
// interrupted request may have taken (see cleanUp).
func (c *Client) abandon(release redisconn.Call) {
	c.abandonWith(func() redisconn.Call { return release })
}

// abandonWith is abandon with a release call that release returns at each
// look: one that depends on what has happened since the request was
// interrupted (see FairMutex.attempt).
func (c *Client) abandonWith(release func() redisconn.Call) {
	if c.closing() {
		// Close gives what it could not reach up: the key expires
		// within its TTL.
		return
	}
	c.cleanups.Clean(func(ctx context.Context) background.Outcome {
		c.cleanUp(ctx, release)
		return background.Cleaned
	})
}

// tidy runs f, a call that takes back what a Lock that gave up left on
// the server (a place in a queue, a writer's intent), with a context
// bounded by AttemptTimeout: at once, or, while the server fails, in the
// background, so that a Lock whose context ended returns at once. Once
// Close has begun, the call ends by Close's time.
func (c *Client) tidy(ctx context.Context, failing bool, f func(ctx context.Context)) {
	run := func(ctx context.Context) {
		ctx, cancel := c.closeBound(ctx)
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, AttemptTimeout)
		defer cancel2()
		f(ctx)
	}
	if !failing {
		run(context.WithoutCancel(ctx))
		return
	}
	c.cleanups.Go(run) // once the Client is closed, what f removes expires
}

// closeLooks spaces out the looks of lookAgain once Close has begun.
const closeLooks = 200 * time.Millisecond

// lookAgain runs take, a call that takes back what a Lock left on the
// server (a place in a queue, a writer's intent), in the background after
// each of background.LateChecks, as a lock's clean-up looks: a call of
// the Lock that got no answer may still reach the server and put it back.
// Every look is taken, since each such call may land at its own time.
// Once Close has begun, it looks every closeLooks until just before
// Close's time, and stops: a single look just before that time did not
// run at all on a loaded machine (its timer fired too late to leave the
// call any of Close's time), and a call that landed within Close's time
// kept its place.
func (c *Client) lookAgain(take redisconn.Call) {
	c.cleanups.Clean(func(ctx context.Context) background.Outcome {
		look := func() {
			ctx, cancel := c.closeBound(ctx)
			defer cancel()
			c.eval(ctx, take)
		}
		for _, wait := range background.LateChecks {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return background.Cleaned
			case <-c.closed:
				t.Stop()
				for {
					last := time.Until(c.closeBy) - 100*time.Millisecond
					wait := min(closeLooks, last)
					t := time.NewTimer(max(wait, 0))
					select {
					case <-ctx.Done():
						t.Stop()
						return background.Cleaned
					case <-t.C:
					}
					look()
					if wait >= last {
						return background.Cleaned
					}
				}
			case <-t.C:
			}
			look()
		}
		return background.Cleaned
	})
}

// cleanupRetry spaces out the looks of a clean-up that cannot reach the
// server.
var cleanupRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// cleanUp runs release(), the release call of what an interrupted request
// may have taken, until it deletes something: again with backoff while
// the server cannot be reached or turns it away (see turnedAway), however
// long, and a few more times
// (background.LateChecks, about four seconds) after it finds nothing,
// since a request still buffered on a paused server runs when it resumes,
// however late. Once Close has begun, it looks once more, within Close's
// time, and stops: a key left expires within its TTL.
func (c *Client) cleanUp(ctx context.Context, release func() redisconn.Call) {
	checks := 0
	for n := 1; ; n++ {
		closing := c.closing()
		lctx, cancel := c.closeBound(ctx)
		v, err := c.eval(lctx, release())
		cancel()
		var wait time.Duration
		switch {
		case err == nil && v != int64(0), closing:
			return
		case err == nil || isReply(err) && !turnedAway(err):
			if checks == len(background.LateChecks) {
				return
			}
			wait = background.LateChecks[checks]
			checks++
		default:
			wait, _ = cleanupRetry.Backoff(n)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.closed:
			t.Stop()
		case <-t.C:
		}
	}
}

// releaseCall is the call of script s that deletes the lock k that token
// holds and wakes waiters: release.lua's shape.
func releaseCall(k keys, token string, s *redisscript.Script) redisconn.Call {
	return redisscript.ReleaseCall{Lock: k.lock, Token: token, Channel: k.channel}.Call(s)
}

// release runs a release call now if the server answers, and otherwise
// in the background (see abandon).
func (c *Client) release(ctx context.Context, call redisconn.Call) error {
	_, err := c.eval(ctx, call)
	if err != nil && unfinished(err) {
		c.abandon(call)
	}
	return err
}
