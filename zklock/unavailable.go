package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/go-zookeeper/zk"
)

// Bounds of the time TryLock waits for an ensemble that does not answer
// (see tryTimeout).
const (
	minTryTimeout = 2 * time.Second
	maxTryTimeout = 5 * time.Second
)

// tryTimeout returns how long a TryLock of a lock of TTL ttl waits for an
// ensemble that does not answer: the TTL, but at least 2s and at most 5s.
// A grant that came later than the TTL could not be used (see
// lease.Fresh).
func tryTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, minTryTimeout), maxTryTimeout)
}

// errTryBound is the cause of a TryLock's context ended by its bound.
var errTryBound = errors.New("zklock: TryLock's time for an ensemble that does not answer ran out")

// An outage is what the requests of one Lock or TryLock met of an
// ensemble that fails: since when they have failed (the start of the
// first failed request since the last answer), and the last failure. The
// zero outage is none.
type outage struct {
	since time.Time
	last  error
}

func (o outage) open() bool { return !o.since.IsZero() }

// A faults records what the requests of one Lock or TryLock met of the
// ensemble. It travels in the call's context, so that every request made
// for the call (see await) reports to it.
type faults struct {
	mu  sync.Mutex
	out outage
}

type faultsKey struct{}

// withFaults returns ctx carrying cl.
func withFaults(ctx context.Context, cl *faults) context.Context {
	return context.WithValue(ctx, faultsKey{}, cl)
}

// report records, in the call ctx carries if any, the outcome of a request
// sent at start: an answer, a failure of the connection (err), or no
// answer before ctx ended (cut), which counts as a failure once the
// request has waited a second.
func report(ctx context.Context, start time.Time, err error, cut bool) {
	cl, _ := ctx.Value(faultsKey{}).(*faults)
	if cl == nil {
		return
	}
	waited := time.Since(start)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch {
	case cut && waited < time.Second:
	case cut:
		err = fmt.Errorf("no answer in %v", waited.Round(time.Millisecond))
		fallthrough
	case transient(err):
		if cl.out.since.IsZero() {
			cl.out.since = start
		}
		cl.out.last = err
	default:
		cl.out = outage{}
	}
}

// outage returns what cl met of the ensemble: the outage of its own
// requests, or, if the last was answered but the Client has lost its
// connection since, that.
func (s *Client) outage(cl *faults) outage {
	cl.mu.Lock()
	o := cl.out
	cl.mu.Unlock()
	if o.open() {
		return o
	}
	s.mu.Lock()
	since := s.lostConn
	s.mu.Unlock()
	if since.IsZero() {
		return outage{}
	}
	last := s.connErr.get()
	if last == nil {
		last = errors.New("connection lost")
	}
	return outage{since: since, last: last}
}

// service names the ensemble in errors: "zookeeper" and its servers.
func (s *Client) service() string { return "zookeeper " + strings.Join(s.servers, ",") }

// unavailable returns the *dlock.UnavailableError of o. go-zookeeper's
// own errors say only that the connection failed; the last failure to
// connect or to talk to a server, if any, says why.
func (s *Client) unavailable(o outage) error {
	last := o.last
	if errors.Is(last, zk.ErrConnectionClosed) || errors.Is(last, zk.ErrNoServer) {
		if why := s.connErr.get(); why != nil {
			last = fmt.Errorf("%w (last: %v)", last, why)
		}
	}
	return dlock.Unavailable(s.service(), o.since, last)
}

// ended returns why ctx has ended, or nil: its cause once it is done, or
// context.DeadlineExceeded once its deadline has passed by the clock (on
// a loaded machine the timer that cancels a context may run late).
func ended(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
