package redislock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redislock/transport"
)

// A Client makes locks on one Redis deployment. It owns the two things its
// locks share: one pub/sub connection that wakes waiters when a lock is
// released, and one renewal scheduler that renews every held lease in
// batches. Create one Client per deployment and share it; it is safe for
// concurrent use.
type Client struct {
	conn  Conn
	id    string // this client's name in lines of waiting clients (see Mutex.lock)
	err   error
	subs  *subscriber
	renew *renewal.Scheduler
	obs   dlock.Observer // from WithObserver and WithLogger; nil for none

	leases lease.Registry

	cleanups background.Group // deletes keys that interrupted calls may have set

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
	c := &Client{conn: conn, id: dlock.NewToken(), obs: lease.Observer(cfg.obs, cfg.log)}
	if conn == nil {
		c.err = errors.New("redislock: New was given a nil Conn; wrap your client with goredisconn.New or rueidisconn.New")
		return c
	}
	c.subs = newSubscriber(conn)
	c.renew = renewal.New(c.renewBatch)
	return c
}

// closeTimeout bounds each of Close's two waits: for the releases of the
// leases still held, and for the clean-ups of interrupted calls.
const closeTimeout = 5 * time.Second

// Close releases every lease the Client still holds, stops renewing,
// finishes the clean-ups of interrupted calls (deleting what a failed or
// abandoned attempt may have taken), and closes the pub/sub connection.
// It waits at most five seconds for the releases and five more for the
// clean-ups; a key the server could not be reached to delete in that time
// expires within its TTL, and Close reports the failure. It does not close
// the Conn's underlying Redis client. Every held lease ends with
// dlock.ErrReleased.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	first, err := c.leases.Close(closeTimeout, ErrClosed)
	if !first {
		return nil
	}
	c.renew.Close()
	if !c.cleanups.Finish(closeTimeout) {
		err = errors.Join(err, fmt.Errorf("redislock: Close: clean-ups of interrupted calls did not finish within %v; what they had to delete expires within its TTL", closeTimeout))
	}
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
func (c *Client) eval(ctx context.Context, s *redisscript.Script, keys []string, args ...string) (any, error) {
	var res [1]transport.Result
	c.conn.Eval(ctx, []transport.Call{{Script: s, Keys: keys, Args: args}}, res[:])
	return res[0].Val, res[0].Err
}

// abandon runs, in the background, the release call of what an
// interrupted request may have taken: it retries while the server cannot
// be reached, and looks again a few times after finding nothing (see
// background.Clean), since a request still buffered on a paused server
// runs when it resumes, however late. After Close has given clean-ups
// their time, a key left expires within its TTL.
func (c *Client) abandon(release transport.Call) {
	c.cleanups.Clean(func(ctx context.Context) background.Outcome {
		v, err := c.eval(ctx, release.Script, release.Keys, release.Args...)
		switch {
		case err == nil && v != int64(0):
			return background.Cleaned
		case err == nil || isReply(err):
			return background.Nothing
		}
		return background.Unreachable
	})
}

// releaseCall is the call of script s that deletes the lock k that token
// holds and wakes waiters: release.lua's shape.
func releaseCall(k keys, token string, s *redisscript.Script) transport.Call {
	return transport.Call{Script: s, Keys: []string{k.lock}, Args: []string{token, k.channel}}
}

// release runs a release call now if the server answers, and otherwise
// in the background (see abandon).
func (c *Client) release(ctx context.Context, call transport.Call) error {
	_, err := c.eval(ctx, call.Script, call.Keys, call.Args...)
	if err != nil && mayHaveRun(err) {
		c.abandon(call)
	}
	return err
}
