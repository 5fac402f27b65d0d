package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"google.golang.org/grpc/connectivity"
)

// Bounds of the time TryLock waits for a cluster that does not answer
// (see tryTimeout).
const (
	minTryTimeout = 2 * time.Second
	maxTryTimeout = 5 * time.Second
)

// tryTimeout returns how long a TryLock of a lock of TTL ttl waits for a
// cluster that does not answer, or that answers only with failures: the
// TTL, but at least 2s and at most 5s. A grant that came later than the
// TTL could not be used (see lease.Fresh).
func tryTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, minTryTimeout), maxTryTimeout)
}

// errTryBound is the cause of a TryLock's context ended by its bound.
var errTryBound = errors.New("etcdlock: TryLock's time for a cluster that does not answer ran out")

// refusedGrace bounds the time a TryLock gives a connection that was
// failing on every endpoint when it began to connect again (see
// whenRefused).
const refusedGrace = 500 * time.Millisecond

// errRefused is the cause of a TryLock's context ended because the client
// has no connection to any endpoint (see whenRefused).
var errRefused = errors.New("etcdlock: no endpoint accepts a connection")

// whenRefused calls f if, before ctx ends, the client's connection fails
// on every endpoint: gRPC's TRANSIENT_FAILURE, which each endpoint that
// refused a connection, or failed one, puts it in until one connects
// again. A TryLock then answers at once, as on the other backends, rather
// than at the end of its bound: a request would wait for a connection
// until its context ended. A connection failing already is tried again
// first, a few times within grace (see reconnect), and f is called only
// if it has not connected by then: a cluster back meanwhile is found. An
// endpoint that accepts connections but does not answer is still waited
// for.
func (c *Client) whenRefused(ctx context.Context, grace time.Duration, f func()) {
	conn := c.cli.ActiveConnection()
	if conn == nil {
		return
	}
	go func() {
		if conn.GetState() == connectivity.TransientFailure {
			// gRPC keeps the state until a connection succeeds.
			end := time.NewTimer(grace)
			defer end.Stop()
			again := time.NewTicker(grace / 5)
			defer again.Stop()
			for conn.ResetConnectBackoff(); conn.GetState() == connectivity.TransientFailure; {
				select {
				case <-ctx.Done():
					return
				case <-end.C:
					f()
					return
				case <-again.C:
					conn.ResetConnectBackoff()
				}
			}
		}
		for s := conn.GetState(); conn.WaitForStateChange(ctx, s); {
			if s = conn.GetState(); s == connectivity.TransientFailure {
				f()
				return
			}
		}
	}()
}

// reconnect makes the client's connection try the endpoints again at
// once if it fails on all of them. gRPC would otherwise wait out its own
// backoff (a second, growing 1.6 times with each failure, up to two
// minutes), however soon the cluster is back, while every request waits
// for a connection until its context ends: a waiter, a renewal or a
// release would meet the cluster back only then. Every attempt calls it,
// so that the retry strategy, and the renewal period, set the pace.
func (c *Client) reconnect() {
	if conn := c.cli.ActiveConnection(); conn != nil && conn.GetState() == connectivity.TransientFailure {
		conn.ResetConnectBackoff()
	}
}

// An outage is what the requests of one Lock or TryLock, or the renewals
// of one grant, met of a cluster that fails: since when they have failed
// (the start of the first failed request since the last answer), and the
// last failure. The zero outage is none.
type outage struct {
	since time.Time
	last  error
}

// failed records a request sent at start that failed with err.
func (o *outage) failed(start time.Time, err error) {
	if o.since.IsZero() {
		o.since = start
	}
	o.last = err
}

// answered records an answer: the outage, if any, is over.
func (o *outage) answered() { *o = outage{} }

func (o outage) open() bool { return !o.since.IsZero() }

// noAnswer is the failure of a request that its caller's context cut
// short after it had waited d.
func noAnswer(d time.Duration) error {
	return fmt.Errorf("no answer in %v", d.Round(time.Millisecond))
}

// service names the cluster in errors: "etcd" and the client's endpoints.
func (c *Client) service() string { return "etcd " + strings.Join(c.cli.Endpoints(), ",") }

// unavailable returns the *dlock.UnavailableError of o.
func (c *Client) unavailable(o outage) error {
	return dlock.Unavailable(c.service(), o.since, o.last)
}

// ended returns why ctx has ended, or nil: its cause once it is done, or
// context.DeadlineExceeded once its deadline has passed by the clock. On
// a loaded machine the timer that cancels a context may run late, and a
// request that fails in the meantime (etcd 3.4 answers "Unknown: context
// deadline exceeded" when it sees the deadline pass first) failed for the
// caller's deadline, whatever its error says.
func ended(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// A call is one Lock or TryLock: whether it is a TryLock, and what its
// requests met of the cluster.
type call struct {
	try bool
	// value, if not nil, is what the call's key holds in place of its
	// owner token: an election's campaign value (see NewElection).
	value *string
	out   outage // of the call's own requests
	g     *grant // the grant it queues, if any: its renewals tell too
}

// outage returns what the call met of the cluster: the outage of its own
// requests, or, if they were answered, of its grant's renewals while it
// waited.
func (cl *call) outage() outage {
	if cl.out.open() || cl.g == nil {
		return cl.out
	}
	cl.g.mu.Lock()
	defer cl.g.mu.Unlock()
	return cl.g.out
}
