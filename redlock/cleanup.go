package redlock

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// acqOutcome is what became of one node's acquire.
type acqOutcome uint8

const (
	acqPending acqOutcome = iota // no reply yet
	acqRefused                   // the script ran and took nothing
	acqTaken                     // the script took the key
	acqUnknown                   // the call failed: the script may still run, late
)

// outcomeOf classifies an acquire reply.
func outcomeOf(r reply) acqOutcome {
	switch {
	case r.res.Err != nil && (redisscript.IsReply(r.res.Err) || unsent(r.res.Err)):
		return acqRefused // the script did not run, failed before writing, or undid its write
	case r.res.Err != nil:
		return acqUnknown
	}
	if v, err := parseVote(r.res.Val); err == nil && v.taken {
		return acqTaken
	}
	return acqRefused
}

// A sweep deletes one token's key, in the background, from every node
// where it may remain after a failed attempt or a release.
type sweep struct {
	call transport.Call // the release
	ttl  time.Duration
	// del: a delete must still reach the node. late: the node's acquire
	// may still run (its call failed), so finding no key there is not
	// final until the cleanupChecks have passed. deleted: the release
	// deleted the key there, so the acquire had landed before it.
	del, late, deleted []bool
	// Replies still to come: of the attempt's acquire, and of the
	// release's first fan-out (nil for a failed attempt). acqKnown is what
	// the release knew of each acquire when it was sent: a release that
	// found no key where the acquire had already answered is final.
	acq      <-chan reply
	acqLeft  int
	rel      <-chan reply
	relLeft  int
	acqKnown []acqOutcome
}

func (c *Client) newSweep(call transport.Call, ttl time.Duration) *sweep {
	n := len(c.nodes)
	return &sweep{call: call, ttl: ttl, del: make([]bool, n), late: make([]bool, n), deleted: make([]bool, n)}
}

// start runs the sweep as a clean-up that Close waits for. When the
// Client is closed, or runs background.MaxCleanups already, the keys left
// expire within their TTL.
func (c *Client) start(s *sweep) {
	if s.acqLeft == 0 && s.relLeft == 0 && c.count(s.del) == 0 {
		return
	}
	c.background.Clean(func(ctx context.Context) background.Outcome {
		c.runSweep(ctx, s)
		return background.Cleaned
	})
}

// runSweep first waits for the replies still to come, so that a slow
// acquire cannot land after its delete unseen; then it deletes the key
// from each node that may hold it, retrying a node that cannot be reached
// until it answers or the TTL has passed (a key it holds has then expired,
// unless a request still buffered on it runs later: a minority's key, for
// at most one TTL), and looking again, after cleanupChecks, on a node
// whose acquire may still run. Once the Client is closing, a node that
// cannot be reached gets one last try and is left: Close need not wait
// for a node that is down.
func (c *Client) runSweep(ctx context.Context, s *sweep) {
	for range s.relLeft {
		r := <-s.rel
		switch {
		case r.res.Err == nil && positive(r.res.Val):
			s.deleted[r.node] = true
		case r.res.Err == nil || redisscript.IsReply(r.res.Err):
			// No key of ours: final if the acquire had answered by then;
			// otherwise the acquire's own outcome decides below.
			if s.acqKnown[r.node] == acqUnknown {
				s.del[r.node], s.late[r.node] = true, true
			}
		case unsent(r.res.Err):
		default:
			s.del[r.node] = true
			s.late[r.node] = s.acqKnown[r.node] == acqUnknown
		}
	}
	for range s.acqLeft {
		r := <-s.acq
		switch outcomeOf(r) {
		case acqTaken:
			// Unless the release deleted it, it may have landed after.
			s.del[r.node] = s.del[r.node] || !s.deleted[r.node]
		case acqUnknown:
			s.del[r.node], s.late[r.node] = true, true
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.ttl)
	defer cancel()
	absent := make([]int, len(c.nodes))
	for n := 1; c.count(s.del) > 0; n++ {
		closing := c.closing()
		failed := false
		replies := c.fanOutTo(ctx, s.call, s.del)
		for range c.count(s.del) {
			r := <-replies
			switch {
			case r.res.Err == nil && positive(r.res.Val):
				s.del[r.node] = false // deleted
			case r.res.Err == nil || redisscript.IsReply(r.res.Err):
				if absent[r.node]++; !s.late[r.node] || absent[r.node] == len(cleanupChecks) {
					s.del[r.node] = false
				}
			case unsent(r.res.Err), closing:
				s.del[r.node] = false // down: nothing to delete that would not expire
			default:
				failed = true
			}
		}
		if c.count(s.del) == 0 {
			return
		}
		wait := cleanupChecks[min(n-1, len(cleanupChecks)-1)]
		var closed <-chan struct{} // a node that cannot be reached gets one last try when Close begins
		if failed {
			wait, _ = releaseRetry.Backoff(n)
			closed = c.closed
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-closed:
			t.Stop()
		case <-t.C:
		}
	}
}

// unsent reports whether err says that a call never reached its server:
// no connection could be made. Nothing of the call can land later, and a
// server that cannot be connected to has nothing to clean up now; what it
// may bring back from disk expires within its TTL.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

var releaseRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// cleanupChecks are the pauses between the looks a clean-up takes on a
// node whose acquire may still run: a request delayed on a dead
// connection (a paused server reads its buffers when it resumes) can set
// the key after a first look found none.
var cleanupChecks = background.LateChecks

func (c *Client) count(todo []bool) int {
	n := 0
	for _, t := range todo {
		if t {
			n++
		}
	}
	return n
}
