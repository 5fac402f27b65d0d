package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
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

	mu     sync.Mutex
	held   map[string]*grant // by token
	closed bool

	cleanups   sync.WaitGroup
	stopClean  context.Context // cancelled by Close
	cancelStop context.CancelFunc
}

// New returns a Client that talks to Redis through conn (see the
// goredisconn and rueidisconn packages). New never fails: a nil conn is
// reported by the first call that needs it.
func New(conn Conn) *Client {
	c := &Client{conn: conn, held: make(map[string]*grant)}
	if conn == nil {
		c.err = errors.New("redislock: New was given a nil Conn; wrap your client with goredisconn.New or rueidisconn.New")
		return c
	}
	c.subs = newSubscriber(conn)
	c.renew = renewal.New(c.renewBatch)
	c.stopClean, c.cancelStop = context.WithCancel(context.Background())
	return c
}

// Close stops renewing, releases every lease the Client still holds
// (waiting at most five seconds), and closes the pub/sub connection. It does
// not close the Conn's underlying Redis client. Leases that could not be
// released end with an error matching dlock.ErrLost and ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed || c.err != nil {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	held := make([]*grant, 0, len(c.held))
	for _, g := range c.held {
		held = append(held, g)
	}
	c.mu.Unlock()

	c.renew.Close()
	c.cancelStop()
	c.cleanups.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, g := range held {
		if err := g.Release(ctx); err != nil {
			g.End(dlock.Lost(ErrClosed))
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.subs.close())
	return errors.Join(errs...)
}

// usable returns the error every call on an unusable Client returns.
func (c *Client) usable() error {
	if c.err != nil {
		return c.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
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
// acquire may have set with token. It retries with backoff until a release
// round trip succeeds, the TTL has passed (the key has then expired anyway),
// or the client is closed.
func (c *Client) abandon(k keys, token string, ttl time.Duration) {
	deadline := time.Now().Add(ttl)
	c.cleanups.Go(func() {
		ctx, cancel := context.WithDeadline(c.stopClean, deadline)
		defer cancel()
		backoff := dlock.ExponentialBackoff(10*time.Millisecond, time.Second)
		for n := 1; ; n++ {
			if _, err := c.eval(ctx, releaseScript, []string{k.lock}, token, k.channel); err == nil || isReply(err) {
				return
			}
			wait, _ := backoff.Backoff(n)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	})
}

// track records g as held, so that Close can release it. It reports false
// if the client was closed meanwhile.
func (c *Client) track(g *grant) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.held[g.Token()] = g
	return true
}

func (c *Client) untrack(g *grant) {
	c.mu.Lock()
	delete(c.held, g.Token())
	c.mu.Unlock()
}

// holds reports whether ctx carries a lease of this client on key.
func (c *Client) holds(ctx context.Context, key string) bool {
	owner, ok := dlock.OwnerFrom(ctx)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.held[owner]
	return g != nil && g.Key() == key
}
