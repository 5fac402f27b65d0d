package goredisconn

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/go-redis/v9"
)

// A batcher sends the script calls that goroutines make at the same time
// on one server as one pipeline (group commit). A call that finds nothing
// in flight is sent at once, alone, so a single goroutine waits for no one;
// calls that arrive while a send is in flight queue, and the queue goes out
// as one pipeline as soon as that send is answered. Many calls then share
// one write and one read, on the client and on the server: under load this
// is what rueidis's automatic pipelining does. There is no timer.
//
// One send is in flight at a time per batcher. A conn has one batcher per
// server: one for a *redis.Client, one per master for a
// *redis.ClusterClient, so that a slow node holds up only its own calls.
type batcher struct {
	conn *conn

	mu    sync.Mutex
	busy  bool       // a send is in flight
	queue []*pending // calls waiting for the next send
	spare []*pending // the last batch's slice, reused for the next queue
}

// A pending call waits in a batcher's queue, then in a batch in flight.
type pending struct {
	ctx    context.Context
	call   redisconn.Call
	result redisconn.Result // set before done is closed
	done   chan struct{}

	// Under the batcher's mu:
	sent bool // taken into a batch: it may run, whatever happens to ctx
	gone bool // its caller left before it was sent: it never will be
}

// eval runs one call: at once if nothing is in flight, else with the next
// batch. When ctx is done first, the result is ctx's error; the call may
// then have run (its batch was already sent) or not, as after a read
// timeout.
func (b *batcher) eval(ctx context.Context, call redisconn.Call) redisconn.Result {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		defer b.handOver() // even if a hook panics
		return b.conn.evalOne(ctx, call)
	}
	p := &pending{ctx: ctx, call: call, done: make(chan struct{})}
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case <-p.done:
		return p.result
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !p.sent {
		p.gone = true
	}
	b.mu.Unlock()
	select {
	case <-p.done: // the reply came meanwhile: it tells what happened
		return p.result
	default:
	}
	return redisconn.Result{Err: ctx.Err()}
}

// handOver is called when a send is answered: it starts sending the queue,
// if any, from a new goroutine, so that the caller whose send it was
// returns at once.
func (b *batcher) handOver() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if batch != nil {
		go b.flush(batch)
	}
}

// take empties the queue into a batch of the calls still wanted, marking
// them sent; with no such call, it marks the batcher idle and returns nil.
// b.mu must be held.
func (b *batcher) take() []*pending {
	batch := b.queue[:0]
	for _, p := range b.queue {
		if !p.gone {
			p.sent = true
			batch = append(batch, p)
		}
	}
	clear(b.queue[len(batch):])
	b.queue, b.spare = b.spare[:0], nil
	if len(batch) == 0 {
		b.busy = false
		if b.queue == nil {
			b.queue = batch
		}
		return nil
	}
	return batch
}

// flush sends batches until the queue is empty.
func (b *batcher) flush(batch []*pending) {
	var calls []redisconn.Call
	var results []redisconn.Result
	for batch != nil {
		calls, results = calls[:0], results[:0]
		for _, p := range batch {
			calls = append(calls, p.call)
			results = append(results, redisconn.Result{})
		}
		ctx, cancel := batchContext(batch)
		b.conn.evalMany(ctx, calls, results)
		cancel()
		for i, p := range batch {
			p.result = results[i]
			close(p.done)
		}
		clear(batch)
		clear(calls)
		b.mu.Lock()
		b.spare = batch[:0]
		batch = b.take()
		b.mu.Unlock()
	}
}

// batchContext returns the context a batch is sent with: one that no
// single caller's cancellation ends, since the others still want their
// replies, and whose deadline (which bounds the I/O when the client has
// ContextTimeoutEnabled) is the latest of the callers', or none if one
// caller has none. A caller whose own context ends leaves without waiting.
// The values (for hooks, tracing) are the first caller's.
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}

// batcherFor returns the batcher of the server that call goes to, or nil
// if the call is to be sent directly: the client is neither a
// *redis.Client nor a *redis.ClusterClient (a Ring, or a user's own
// Client, whose routing the conn does not know), or the Cluster's map of
// slots cannot tell the node.
func (c *conn) batcherFor(ctx context.Context, call redisconn.Call) *batcher {
	if c.one != nil {
		return c.one
	}
	cc, ok := c.c.(*redis.ClusterClient)
	if !ok || len(call.Keys) == 0 {
		return nil
	}
	node, err := cc.MasterForKey(ctx, call.Keys[0])
	if err != nil {
		return nil
	}
	addr := node.Options().Addr
	if b, ok := c.nodes.Load(addr); ok {
		return b.(*batcher)
	}
	b, _ := c.nodes.LoadOrStore(addr, &batcher{conn: c})
	return b.(*batcher)
}
