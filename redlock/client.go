package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// A Client makes Redlock locks over N independent Redis masters. It owns
// one renewal scheduler for all its leases. Create one per set of nodes and
// share it; it is safe for concurrent use.
type Client struct {
	nodes  []node
	state  []*nodeState // by node
	quorum int
	cfg    clientConfig
	err    error
	renew  *renewal.Scheduler
	obs    dlock.Observer // from WithObserver and WithLogger; nil for none

	// counters has bit s set once a node has reported a fence counter for
	// slot s: the acquires of other slots guess that theirs is missing
	// (see QuorumAcquireCall.Fresh).
	counters [rediskeys.Slots / 64]atomic.Uint64

	leases lease.Registry
	// workers run the nodes' calls.
	workers workers

	// background runs the clean-ups (the deletes of keys that failed
	// attempts and releases left), the nodes' configuration checks, and
	// the retakes that follow renewals (see retake.go).
	background background.Group
	// closed is closed when Close begins: the clean-ups then make their
	// last pass.
	closed    chan struct{}
	closeOnce sync.Once
}

type node struct {
	conn redisconn.Conn
	name string
}

// New returns a Client over the given nodes: independent Redis masters (not
// replicas of each other, not one Cluster), each through its own Conn. New
// never fails; an empty, nil or duplicate node, or a bad option, is
// reported by the first lock operation.
func New(nodes []redisconn.Conn, opts ...ClientOption) *Client {
	c := &Client{cfg: newClientConfig(opts), closed: make(chan struct{}), workers: workers{jobs: make(chan func())}}
	c.obs = lease.Observer(c.cfg.obs, c.cfg.log)
	c.err = c.setNodes(nodes)
	if c.err == nil && c.cfg.nodeTimeout <= 0 {
		c.err = fmt.Errorf("redlock: node timeout %v must be positive; set it with WithNodeTimeout", c.cfg.nodeTimeout)
	}
	if c.err == nil && c.cfg.detectRestart && c.cfg.restartWindow <= 0 {
		c.err = fmt.Errorf("redlock: restart window %v must be positive; set it with WithRestartWindow (WithoutRestartDetection turns detection off)", c.cfg.restartWindow)
	}
	c.renew = renewal.New(c.renewBatch)
	return c
}

func (c *Client) setNodes(conns []redisconn.Conn) error {
	if len(conns) == 0 {
		return errors.New("redlock: New needs at least one node; use an odd number, 3 or 5, of independent masters")
	}
	seenAddr := map[string]int{}
	for i, conn := range conns {
		if conn == nil {
			return fmt.Errorf("redlock: node %d is a nil Conn", i)
		}
		name := fmt.Sprintf("node %d", i)
		if a, ok := conn.(interface{ Addr() string }); ok && a.Addr() != "" {
			name = a.Addr()
			if j, dup := seenAddr[name]; dup {
				return fmt.Errorf("redlock: nodes %d and %d are both %s; every node must be a different master", j, i, name)
			}
			seenAddr[name] = i
		}
		for j := range i {
			if sameConn(conns[j], conn) {
				return fmt.Errorf("redlock: nodes %d and %d are the same Conn; every node must be a different master", j, i)
			}
		}
		c.nodes = append(c.nodes, node{conn: conn, name: name})
		c.state = append(c.state, &nodeState{})
	}
	c.quorum = len(conns)/2 + 1
	return nil
}

func sameConn(a, b redisconn.Conn) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// Nodes returns the number of nodes.
func (c *Client) Nodes() int { return len(c.nodes) }

// Quorum returns how many nodes make a majority: len(nodes)/2 + 1.
func (c *Client) Quorum() int { return c.quorum }

// closeWait bounds Close's wait for the nodes.
const closeWait = time.Second

// Close releases every lease the Client still holds, stops renewing, and
// ends the clean-ups: the deletes of what failed attempts took and of
// what releases could not delete at once. It waits for the nodes at most
// one second in all (closeWait): a release that has not reached a
// majority by then leaves its keys to expire within their TTL, and the
// lease ends with dlock.ErrLost wrapping ErrClosed. Each clean-up gets one
// last try on each node left, bounded by the node timeout, once Close
// begins, and no more: it no longer looks again for an acquire that may
// still land (the keys such an acquire sets expire within their TTL; on a
// loaded host, where calls outlast the node timeout, they can be on a
// majority, so that the lock stays taken for a TTL by no one). Nodes that cannot be reached, or do not answer, so
// cost Close one second at most. It does not close the nodes' Redis
// clients. A lease still held ends released (dlock.ErrReleased), or, if
// no majority confirmed its release, with dlock.ErrLost wrapping
// ErrClosed.
func (c *Client) Close() error {
	closeBy := time.Now().Add(closeWait)
	c.closeOnce.Do(func() { close(c.closed) }) // the clean-ups make their last try
	first, err := c.leases.Close(closeWait, ErrClosed)
	if !first {
		return nil
	}
	c.renew.Close()
	// Every clean-up ends by its last try, within the node timeout: the
	// margin is for the goroutines to return on a loaded machine.
	if !c.background.Finish(max(time.Until(closeBy), c.cfg.nodeTimeout) + 500*time.Millisecond) {
		err = errors.Join(err, fmt.Errorf("redlock: Close: clean-ups did not finish within %v; the keys they had to delete expire within their TTL", closeWait))
	}
	return err
}

// closing reports whether Close has begun its clean-ups' last pass.
func (c *Client) closing() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *Client) usable() error {
	if c.err != nil {
		return c.err
	}
	if c.leases.Closed() {
		return ErrClosed
	}
	return nil
}

// reply is one node's outcome of one call.
type reply struct {
	node int
	res  redisconn.Result
}

// fanOut sends call to every node at once, each with the node timeout, and
// returns a channel that receives each node's reply as it arrives.
func (c *Client) fanOut(ctx context.Context, call redisconn.Call) <-chan reply {
	return c.fanOutTo(ctx, call, nil)
}

// fanOutTo is fanOut to the nodes i with only[i] set, or all if only is nil.
func (c *Client) fanOutTo(ctx context.Context, call redisconn.Call, only []bool) <-chan reply {
	replies, _ := c.fanOutFor(ctx, call, only, c.cfg.nodeTimeout)
	return replies
}

// A fan is the calls of one fan-out: they share one context, cancelled
// when the last of them has returned.
type fan struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   atomic.Int32
	// told[i] is set once node i's reply is on its way: its own, or, when
	// the context ends first, one that says so (see fanOutFor).
	told []atomic.Bool
}

// cutAt ends the calls still running at t, at once if t has passed.
func (f *fan) cutAt(t time.Time) {
	if f.left.Load() == 0 {
		return
	}
	if d := time.Until(t); d > 0 {
		time.AfterFunc(d, f.cancel)
	} else {
		f.cancel()
	}
}

// fanOutFor is fanOutTo with each call bounded by timeout. Each node
// sends one reply: its call's, or, if the fan's context ends first (the
// timeout passes, or ctx ends), one whose error says so, at once, whether
// or not the Conn has returned (go-redis without ContextTimeoutEnabled
// ends a call at its ReadTimeout only). A call given up so may still run
// on its node, as one that timed out may.
func (c *Client) fanOutFor(ctx context.Context, call redisconn.Call, only []bool, timeout time.Duration) (<-chan reply, *fan) {
	out := make(chan reply, len(c.nodes))
	sent := int32(len(c.nodes))
	if only != nil {
		sent = int32(c.count(only))
	}
	f := &fan{}
	if sent == 0 {
		return out, f
	}
	// The callback below may run after the caller has its replies and
	// has reused only for its next fan-out.
	only = slices.Clone(only)
	f.ctx, f.cancel = context.WithTimeout(ctx, timeout)
	f.left.Store(sent)
	f.told = make([]atomic.Bool, len(c.nodes))
	for i, n := range c.nodes {
		if only != nil && !only[i] {
			continue
		}
		c.workers.run(func() {
			var res [1]redisconn.Result
			n.conn.Eval(f.ctx, []redisconn.Call{call}, res[:])
			if f.told[i].CompareAndSwap(false, true) {
				out <- reply{i, res[0]}
			}
			if f.left.Add(-1) == 0 {
				f.cancel()
			}
		})
	}
	context.AfterFunc(f.ctx, func() {
		err := f.ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = &noAnswer{timeout: timeout, err: err}
		}
		for i := range c.nodes {
			if (only == nil || only[i]) && f.told[i].CompareAndSwap(false, true) {
				out <- reply{i, redisconn.Result{Err: err}}
			}
		}
	})
	return out, f
}

// A noAnswer is the reply fanOutFor gives for a node that did not answer
// within the node timeout: the node's failure, where a bare context error
// is the caller's context ending first (see cutByCaller).
type noAnswer struct {
	timeout time.Duration
	err     error
}

func (e *noAnswer) Error() string { return fmt.Sprintf("no answer within %v: %v", e.timeout, e.err) }

func (e *noAnswer) Unwrap() error { return e.err }

// cutByCaller reports whether err, a node's failure in a fan-out, says
// only that the caller's context ended before the node answered: it then
// tells nothing of the node.
func cutByCaller(err error) bool {
	var na *noAnswer
	return !errors.As(err, &na) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
