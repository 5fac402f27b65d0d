package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
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
	case r.res.Err != nil && (redisscript.IsReply(r.res.Err) || redisscript.Unsent(r.res.Err)):
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
	call redisconn.Call // the release
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
	// before, if not nil, runs first: it waits for a retake under way and
	// marks late the nodes where one may still land (see retake.go).
	before func()
}

func (c *Client) newSweep(call redisconn.Call, ttl time.Duration) *sweep {
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
// from each node that may hold it, retrying a node that cannot be reached,
// or turns the release away for now (BUSY, LOADING, ...), until it answers
// or the TTL has passed (a key it holds has then expired,
// unless a request still buffered on it runs later: a minority's key, for
// at most one TTL), and looking again, at lateLooks, on a node
// whose acquire may still run. Once the Client is closing, every node
// left gets one last try and is left: Close need not wait for a node that
// is down, nor for an acquire that may still land (its keys expire within
// their TTL).
func (c *Client) runSweep(ctx context.Context, s *sweep) {
	if s.before != nil {
		s.before()
	}
	for range s.relLeft {
		r := <-s.rel
		switch {
		case r.res.Err == nil && positive(r.res.Val):
			s.deleted[r.node] = true
		case r.res.Err == nil || redisscript.IsReply(r.res.Err) && !redisscript.TurnedAway(r.res.Err):
			// No key of ours: final if the acquire had answered by then;
			// otherwise the acquire's own outcome decides below.
			if s.acqKnown[r.node] == acqUnknown {
				s.del[r.node], s.late[r.node] = true, true
			}
		case redisscript.Unsent(r.res.Err):
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
	// Each node keeps its own schedule: absent counts the looks that found
	// no key there, first is when the first of them was sent, and due is
	// when the node is looked at next. The late looks are due at fixed
	// offsets from first, so that slow replies and late timers on a loaded
	// machine do not add up. A look that fails does not advance the
	// schedule: the node is tried again with backoff.
	absent := make([]int, len(c.nodes))
	first := make([]time.Time, len(c.nodes))
	due := make([]time.Time, len(c.nodes))
	look := make([]bool, len(c.nodes))
	for n := 1; ; n++ {
		closing := c.closing()
		sent := time.Now()
		for i := range look {
			look[i] = s.del[i] && !due[i].After(sent)
		}
		replies := c.fanOutTo(ctx, s.call, look)
		for range c.count(look) {
			r := <-replies
			i := r.node
			switch {
			case r.res.Err == nil && positive(r.res.Val):
				s.del[i] = false // deleted
			case r.res.Err == nil || redisscript.IsReply(r.res.Err) && !redisscript.TurnedAway(r.res.Err):
				if absent[i]++; absent[i] == 1 {
					first[i] = sent
				}
				if !s.late[i] || absent[i] > len(lateLooks) || closing {
					s.del[i] = false
				} else {
					due[i] = first[i].Add(lateLooks[absent[i]-1])
				}
			case redisscript.Unsent(r.res.Err), closing:
				s.del[i] = false // down: nothing to delete that would not expire
			default:
				wait, _ := releaseRetry.Backoff(n)
				due[i] = time.Now().Add(wait)
			}
		}
		var next time.Time
		var closed <-chan struct{} // a node that cannot be reached gets one last try when Close begins
		for i, d := range s.del {
			if d && (next.IsZero() || due[i].Before(next)) {
				next = due[i]
			}
			if d && !closing {
				closed = c.closed
			}
		}
		if next.IsZero() {
			return
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-closed:
			t.Stop()
			for i := range due { // the last try, now
				due[i] = time.Time{}
			}
		case <-t.C:
		}
	}
}

var releaseRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// lateLooks are when a clean-up looks again, after its first look found
// no key, on a node whose acquire may still run: a request delayed on a
// dead connection (a paused server reads its buffers when it resumes) can
// set the key after a first look found none. They are offsets from that
// first look, so that slow replies do not add up. Close cuts them short
// (see runSweep).
var lateLooks = []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 1300 * time.Millisecond}

func (c *Client) count(todo []bool) int {
	n := 0
	for _, t := range todo {
		if t {
			n++
		}
	}
	return n
}
