package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// lateConn is a Conn whose failures are read late: the first time the
// text of one is read, it waits until the time in until has passed. The
// acquire reads its nodes' failures once it has them all, to describe
// them, so the deadline of a Lock passes after the nodes refused and
// before the Lock looks at its context: as when, on a loaded machine, the
// goroutine that counts the replies runs only after the deadline that
// they beat.
type lateConn struct {
	redisconn.Conn
	until *atomic.Int64 // UnixNano; 0 for no wait
}

func (c lateConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.Conn.Eval(ctx, calls, results)
	for i := range results {
		if results[i].Err != nil {
			results[i].Err = &lateError{err: results[i].Err, until: time.Unix(0, c.until.Load())}
		}
	}
}

type lateError struct {
	err   error
	until time.Time
}

func (e *lateError) Error() string {
	time.Sleep(time.Until(e.until))
	return e.err.Error()
}

func (e *lateError) Unwrap() error { return e.err }

// Issue 36: a Lock whose context ends while the nodes refuse connections
// reports the context's error and ErrUnavailable, even when its deadline
// passes between the nodes' refusals and the moment the Lock looks at them
// (the round in which the deadline lands was taken for one cut short by
// the context, which tells nothing of the nodes: the error said "lock not
// obtained: context deadline exceeded" only, as
// TestIntegrationConformance's LockWaitingWhenServersGo/Refused did on a
// loaded machine). TryLock so cut returns ErrUnavailable, not
// ErrNotObtained. Each transport, with one, three and five nodes.
func TestIntegrationDeadlineAfterRefusals(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	for _, tr := range transports {
		for _, n := range []int{1, 3, 5} {
			t.Run(fmt.Sprintf("%s/N=%d", tr.name, n), func(t *testing.T) {
				t.Parallel()
				until := new(atomic.Int64)
				conns := make([]redisconn.Conn, n)
				proxies := make([]*testenv.Proxy, n)
				for i, s := range servers[:n] {
					proxies[i] = testenv.StartProxy(t, s.Addr())
					conns[i] = lateConn{Conn: tr.open(t, proxies[i].Addr()), until: until}
				}
				c := redlock.New(conns, redlock.WithNodeTimeout(time.Second))
				t.Cleanup(func() { c.Close() })
				for _, p := range proxies {
					p.SetRefuse(true)
					p.Reset()
				}
				for _, call := range []struct {
					name      string
					do        func(context.Context) (dlock.Lease, error)
					want      []error
					notObtain bool
				}{
					{"Lock", c.NewMutex(t.Name()).Lock, []error{dlock.ErrNotObtained, context.DeadlineExceeded, dlock.ErrUnavailable}, true},
					{"TryLock", c.NewMutex(t.Name()).TryLock, []error{dlock.ErrUnavailable}, false},
				} {
					// The nodes refuse within milliseconds; a second is
					// enough for that on a loaded machine.
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					deadline, _ := ctx.Deadline()
					until.Store(deadline.Add(20 * time.Millisecond).UnixNano())
					l, err := call.do(ctx)
					cancel()
					if err == nil {
						l.Release(context.Background())
						t.Fatalf("%s on nodes that refuse succeeded", call.name)
					}
					t.Logf("%s: %v", call.name, err)
					for _, w := range call.want {
						if !errors.Is(err, w) {
							t.Errorf("%s whose deadline passed after the nodes refused = %v; want it to match %v", call.name, err, w)
						}
					}
					if !call.notObtain && errors.Is(err, dlock.ErrNotObtained) {
						t.Errorf("%s on nodes that refused = %v; want no ErrNotObtained", call.name, err)
					}
				}
			})
		}
	}
}

// Issue 36: when so many nodes fail that no majority can vote, Lock and
// TryLock say so (ErrUnavailable) even if the first replies of a round
// include a node that answers the lock is held, and the round has no
// majority for this client before the failing nodes have all replied: a
// round that stopped there called the lock held by another (the error
// said "lock not obtained: context deadline exceeded" only), though
// nobody can tell whether it is held. Here one node answers (the lock is
// held), and of the others half refuse connections and half are silent.
func TestIntegrationMinorityAnswersHeld(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	for _, tr := range transports {
		for _, n := range []int{3, 5} {
			t.Run(fmt.Sprintf("%s/N=%d", tr.name, n), func(t *testing.T) {
				t.Parallel()
				name := t.Name()
				addrs := addrsOf(servers[:n])
				holder := newClient(t, addrs, tr.open, redlock.WithNodeTimeout(time.Second))
				held, err := holder.NewMutex(name, redlock.WithTTL(20*time.Second)).Lock(timeout(t, 10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				defer held.Release(context.Background())
				proxies := make([]*testenv.Proxy, n)
				via := make([]string, n)
				for i, a := range addrs {
					proxies[i] = testenv.StartProxy(t, a)
					via[i] = proxies[i].Addr()
				}
				c := newClient(t, via, tr.open, redlock.WithNodeTimeout(300*time.Millisecond))
				for i, p := range proxies[1:] {
					if i%2 == 0 {
						p.SetRefuse(true)
						p.Reset()
					} else {
						p.Blackhole(true)
					}
				}
				for _, call := range []struct {
					name      string
					do        func(context.Context) (dlock.Lease, error)
					want      []error
					notObtain bool
				}{
					{"Lock", c.NewMutex(name).Lock, []error{dlock.ErrNotObtained, context.DeadlineExceeded, dlock.ErrUnavailable}, true},
					{"TryLock", c.NewMutex(name).TryLock, []error{dlock.ErrUnavailable}, false},
				} {
					l, err := call.do(timeout(t, 1500*time.Millisecond))
					if err == nil {
						l.Release(context.Background())
						t.Fatalf("%s of a held lock succeeded", call.name)
					}
					t.Logf("%s: %v", call.name, err)
					for _, w := range call.want {
						if !errors.Is(err, w) {
							t.Errorf("%s with %d of %d nodes failing = %v; want it to match %v", call.name, n-1, n, err, w)
						}
					}
					if !call.notObtain && errors.Is(err, dlock.ErrNotObtained) {
						t.Errorf("%s with %d of %d nodes failing = %v; want no ErrNotObtained", call.name, n-1, n, err)
					}
				}
			})
		}
	}
}
