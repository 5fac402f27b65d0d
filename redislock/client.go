package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A Client makes locks on one Redis deployment. It owns the two things its
// locks share: one pub/sub connection that wakes waiters when a lock is
// released, and one renewal scheduler that renews every held lease in
// batches. Create one Client per deployment and share it; it is safe for
// concurrent use.
type Client struct {
	conn  Conn
	err   error
	subs  *subscriber
	renew *renewal.Scheduler
	obs   dlock.Observer // from WithObserver and WithLogger; nil for none

	leases lease.Registry

	cleanups background.Group // deletes keys that interrupted calls may have set
}

// New returns a Client that talks to Redis through conn (see the
// goredisconn and rueidisconn packages), configured by opts (WithObserver,
// WithLogger). New never fails: a nil conn is reported by the first call
// that needs it.
func New(conn Conn, opts ...ClientOption) *Client {
	cfg := newClientConfig(opts)
	c := &Client{conn: conn, obs: lease.Observer(cfg.obs, cfg.log)}
	if conn == nil {
		c.err = errors.New("redislock: New was given a nil Conn; wrap your client with goredisconn.New or rueidisconn.New")
		return c
	}
	c.subs = newSubscriber(conn)
	c.renew = renewal.New(c.renewBatch)
	return c
}

// Close releases every lease the Client still holds (waiting at most five
// seconds), stops renewing, and closes the pub/sub connection. It does not
// close the Conn's underlying Redis client. Every held lease ends with
// dlock.ErrReleased; a key the server could not be reached to delete
// expires within its TTL, and Close reports the failure.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	first, err := c.leases.Close(5*time.Second, ErrClosed)
	if !first {
		return nil
	}
	c.renew.Close()
	c.cleanups.Close()
	return errors.Join(err, c.subs.close())
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

// eval runs one script call.
func (c *Client) eval(ctx context.Context, s *Script, keys []string, args ...string) (any, error) {
	var res [1]Result
	c.conn.Eval(ctx, []Call{{Script: s, Keys: keys, Args: args}}, res[:])
	return res[0].Val, res[0].Err
}

// abandon deletes, in the background, a lock key that an interrupted
// acquire may have set with token. It retries with backoff until the
// release deletes the key, or has found it absent often enough and long
// enough (see cleanupChecks) that a stale request still buffered for the
// server would have landed; or until the TTL has passed (the key has then
// expired anyway), or the client is closed.
func (c *Client) abandon(k keys, token string, ttl time.Duration, release *Script) {
	deadline := time.Now().Add(ttl)
	c.cleanups.Go(func(ctx context.Context) { // after Close, the key expires within its TTL
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		absent := 0
		for n := 1; ; n++ {
			v, err := c.eval(ctx, release, []string{k.lock}, token, k.channel)
			switch {
			case err == nil && v != int64(0):
				return // deleted
			case err == nil || isReply(err):
				if absent++; absent == len(cleanupChecks) {
					return
				}
			}
			wait := cleanupChecks[min(absent, len(cleanupChecks)-1)]
			if err != nil {
				wait, _ = cleanupRetry.Backoff(n)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	})
}

// cleanupChecks are the pauses between the checks a clean-up makes after
// finding its key absent: a request delayed on a dead connection (a paused
// server reads its buffers when it resumes) can still set the key after a
// first check.
var cleanupChecks = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second}

var cleanupRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// release deletes the key that token holds, now if the server answers, and
// otherwise in the background (see abandon).
func (c *Client) release(ctx context.Context, k keys, token string, ttl time.Duration, release *Script) error {
	_, err := c.eval(ctx, release, []string{k.lock}, token, k.channel)
	if err != nil && !isReply(err) {
		c.abandon(k, token, ttl, release)
	}
	return err
}
