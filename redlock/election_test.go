package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

func TestIntegrationElection(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	for _, n := range []int{3, 1} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			servers := testenv.StartRedisN(t, n, testenv.RedisConfig{})
			age(t, servers)
			addrs := addrsOf(servers)
			options := func(o dlocktest.Options) []redlock.Option {
				opts := []redlock.Option{redlock.WithTTL(o.TTL)}
				if o.NoRenewal {
					opts = append(opts, redlock.WithoutRenewal())
				}
				return opts
			}
			// The node timeout: see backend.
			clientOptions := func(o dlocktest.Options) []redlock.ClientOption {
				return []redlock.ClientOption{redlock.WithNodeTimeout(250 * time.Millisecond), redlock.WithRestartWindow(o.TTL)}
			}
			var cutOff *landings // the cut-off leader's client's
			dlocktest.RunElection(t, dlocktest.ElectionBackend{
				NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
					return newClient(t, addrs, transports[0].open, clientOptions(o)...).NewElection(name, options(o)...)
				},
				CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
					proxies := make([]*testenv.Proxy, len(addrs))
					via := make([]string, len(addrs))
					for i, a := range addrs {
						proxies[i] = testenv.StartProxy(t, a)
						via[i] = proxies[i].Addr()
					}
					cutOff = newLandings(via)
					e := newClient(t, via, cutOff.open(transports[0].open), clientOptions(o)...).NewElection(name, options(o)...)
					return e, func() {
						// Once the calls under way have landed (each
						// answer says when), as a cut between two calls:
						// a call that landed but whose answer was lost
						// would extend the keys past the horizon
						// measured (see NewElection).
						cutOff.gate.Lock()
						defer cutOff.gate.Unlock()
						for _, p := range proxies {
							p.Blackhole(true)
							t.Cleanup(func() { p.Blackhole(false); p.Reset() })
						}
						cutOff.cut = time.Now()
					}
				},
				// The lock key's expiry on each node, by the node's clock
				// (see NewElection): the drift allowance and the latency
				// of the leader's last renewal after its Until.
				LeaderHorizon: dlock.Drift(dlocktest.ElectionTTL),
				CutOffHorizon: func(t testing.TB, lease dlock.Lease) time.Duration {
					return cutOff.horizon(t, lease, dlocktest.ElectionTTL, n/2+1)
				},
				Handover: 500 * time.Millisecond, // DefaultRetry's longest sleep
			})
		})
	}
}

// landings watches the calls of a client whose nodes CutOff can cut off:
// when each node last answered a call that may have set or extended the
// lock key. A node runs a call before it answers, so its key expires at
// most a TTL after that answer, by its own clock, which on this machine
// is the test's.
type landings struct {
	// gate is read-locked by each call while it is under way; the cut
	// write-locks it, to wait for those under way and hold new ones back
	// until the nodes are cut off.
	gate sync.RWMutex
	cut  time.Time // when the nodes were cut off

	mu       sync.Mutex
	addrs    []string
	answered []time.Time // by node: the latest answer to such a call
	lost     []bool      // by node: such a call got no answer, and may have landed since
}

func newLandings(addrs []string) *landings {
	return &landings{addrs: addrs, answered: make([]time.Time, len(addrs)), lost: make([]bool, len(addrs))}
}

// open returns an opener whose connections report to l.
func (l *landings) open(open opener) opener {
	return func(t testing.TB, addr string) redisconn.Conn {
		node := slices.Index(l.addrs, addr)
		if node < 0 {
			t.Fatalf("landings: %s is not a node", addr)
		}
		return landingConn{open(t, addr), l, node}
	}
}

type landingConn struct {
	redisconn.Conn
	l    *landings
	node int
}

func (c landingConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.l.gate.RLock()
	defer c.l.gate.RUnlock()
	// Not cut short by ctx: a call the client gave up on (its node
	// timeout, or a decided renewal) may still land, and only its answer
	// says by when it did. The client bounds its wait by itself.
	c.Conn.Eval(context.WithoutCancel(ctx), calls, results)
	at := time.Now()
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	for i, call := range calls {
		switch call.Script {
		case redisscript.ElectPublish, redisscript.ElectRead, redisscript.ElectWithdraw:
			continue // the record, not the lock key
		}
		var reply *redisconn.ReplyError
		if err := results[i].Err; err != nil && !errors.As(err, &reply) {
			c.l.lost[c.node] = true
		}
		c.l.answered[c.node] = at
	}
}

// horizon returns how long after lease's Until its lock key may still be
// on quorum nodes: a TTL after their last answers, less the Until, which
// is the start of the grant or renewal that set it, plus a TTL, less the
// drift allowance. So it is that allowance plus the latency of the last
// renewal, as the client saw it.
func (l *landings) horizon(t testing.TB, lease dlock.Lease, ttl time.Duration, quorum int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	expiry := make([]time.Time, len(l.answered))
	for i, at := range l.answered {
		expiry[i] = at.Add(ttl)
		if l.lost[i] {
			// A call got no answer before the cut (a node that took
			// more than goRedis's read timeout, a second): it may have
			// landed as late as the cut.
			expiry[i] = l.cut.Add(ttl)
			t.Logf("node %d: a call got no answer; its landing is bounded by the cut only", i)
		}
	}
	slices.SortFunc(expiry, func(a, b time.Time) int { return b.Compare(a) })
	h := expiry[quorum-1].Sub(lease.Until())
	t.Logf("measured: the cut-off leader's keys expire on a majority by %v after its Until (drift allowance %v, so its last renewal's latency is at most %v)",
		h.Round(time.Millisecond), dlock.Drift(ttl), (h - dlock.Drift(ttl)).Round(time.Millisecond))
	return h
}
