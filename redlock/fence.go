package redlock

import (
	"context"

	"github.com/dlock-go/dlock/internal/redisscript"
)

// liftStep is the granularity, in microseconds, to which quorum_acquire.lua
// lifts a fence counter to its server's clock: nodes whose clocks agree
// within it lift a new counter to the same value.
const liftStep = 100_000

// chooseFence returns the fence of an attempt from the votes of the nodes
// that took its key (a majority of them voters), and whether their
// counters agreed. Each node's counter was incremented by the acquire that
// took its key, so when they all read the same value f, a majority already
// holds f: the fence needs no write-back. Otherwise the fence is the
// largest of them (a node without a counter counts its clock, rounded up
// as the script would lift it) and must be written back to a majority
// (writeFence). Counting the nodes that may not vote yet as well keeps
// every node's counter in step, so that the next grant agrees whichever
// nodes answer first.
func chooseFence(votes []vote, took []int) (fence uint64, agreed bool) {
	agreed = true
	for k, i := range took {
		f := votes[i].counter
		if f == 0 {
			f = uint64((votes[i].timeUS + liftStep - 1) / liftStep * liftStep)
			agreed = false
		}
		if k > 0 && f != fence {
			agreed = false
		}
		fence = max(fence, f)
	}
	return fence, agreed
}

// learn records what an acquire's vote v on the given slot tells of the
// node: whether it holds a counter for the slot.
func (c *Client) learn(slot uint16, v vote) {
	if v.counter > 0 {
		c.sawCounter(slot)
	}
}

// sawCounter records that a node holds a fence counter for slot s.
func (c *Client) sawCounter(s uint16) {
	if w, bit := &c.counters[s/64], uint64(1)<<(s%64); w.Load()&bit == 0 {
		w.Or(bit)
	}
}

// knowsCounter reports whether a node has reported a fence counter for
// slot s.
func (c *Client) knowsCounter(s uint16) bool {
	return c.counters[s/64].Load()&(1<<(s%64)) != 0
}

// writeFence raises the fence counter to fence on the nodes that took
// token's key; it needs a majority of nodes that still hold that key.
func (m *Mutex) writeFence(ctx context.Context, holders []int, token string, fence uint64) error {
	only := make([]bool, len(m.c.nodes))
	for _, i := range holders {
		only[i] = true
	}
	call := redisscript.QuorumFenceCall{Lock: m.keys.lock, Counter: m.keys.fence, Token: token, Fence: fence}.Call()
	replies := m.c.fanOutTo(ctx, call, only)
	ok := 0
	var nodeErrs []error
	for answered := 0; answered < len(holders) && ok < m.c.quorum; answered++ {
		r := <-replies
		switch {
		case r.res.Err != nil:
			nodeErrs = append(nodeErrs, &NodeError{Node: m.c.nodes[r.node].name, Err: r.res.Err})
		case r.res.Val == int64(1):
			ok++
		}
	}
	if ok < m.c.quorum {
		return errQuorum("fence write", m.keys.lock, ok, m.c.quorum, len(m.c.nodes), nodeErrs)
	}
	return nil
}
