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

// Leader, and an observer's reads, wait for the nodes up to the TTL, not
// the node timeout (see NewElection): a read spends no validity. Before,
// nodes slower than the node timeout made Leader fail ("reading the
// leader ... reached 0 of 3 nodes", as a loaded machine's did at 250ms)
// while a majority held the leader. It still decides as soon as a majority
// agrees: one silent node does not hold it up.
func TestIntegrationElectionLeaderThroughSlowNodes(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own
	const ttl, nodeTimeout = 4 * time.Second, 100 * time.Millisecond
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	addrs := addrsOf(servers)
	proxies, via := proxiesFor(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "slow-nodes"
	// A node timeout of a second for the leader, which the proxies do not
	// slow down; the reader's is 100ms, and its go-redis read timeout
	// longer than the TTL, so that only Leader's own wait ends a call to
	// a silent node.
	leader := newClient(t, addrs, goRedis, redlock.WithNodeTimeout(time.Second)).NewElection(name, redlock.WithTTL(ttl))
	patient := func(t testing.TB, addr string) redisconn.Conn { return goRedisTimeout(t, addr, 2*ttl) }
	reader := newClient(t, via, patient, redlock.WithNodeTimeout(nodeTimeout)).NewElection(name, redlock.WithTTL(ttl))
	l, err := leader.Campaign(ctx, "leader")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	read := func(what string) (dlock.Leader, time.Duration, error) {
		start := time.Now()
		got, err := reader.Leader(ctx)
		took := time.Since(start)
		t.Logf("measured: Leader with %s: %+v, %v in %v", what, got, err, took.Round(time.Millisecond))
		return got, took, err
	}
	want := dlock.Leader{Value: "leader", Term: l.Fence()}
	if got, _, err := read("every node quick"); err != nil || got != want {
		t.Fatalf("Leader = %+v, %v; want %+v", got, err, want)
	}

	const slow = 3 * nodeTimeout // still well within the TTL
	for _, p := range proxies {
		p.SetReplyLatency(slow)
	}
	if got, took, err := read(fmt.Sprintf("every node answering %v late, node timeout %v", slow, nodeTimeout)); err != nil || got != want {
		t.Fatalf("Leader = %+v, %v after %v; want %+v: the nodes answered within the TTL", got, err, took, want)
	}

	// One node silent: the other two agree, and Leader does not wait for
	// the silent one (the TTL).
	for _, p := range proxies {
		p.SetReplyLatency(0)
	}
	proxies[0].Blackhole(true)
	if got, took, err := read("one node of 3 silent"); err != nil || got != want {
		t.Fatalf("Leader = %+v, %v after %v; want %+v", got, err, took, want)
	} else if took >= ttl/2 {
		t.Fatalf("Leader took %v with one node of 3 silent; want the two others' answer, well within the TTL %v", took, ttl)
	}

	// A majority silent: Leader fails, once the TTL has passed, naming
	// no leader.
	proxies[1].Blackhole(true)
	if got, took, err := read("two nodes of 3 silent"); err == nil || errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader = %+v, %v after %v; want an error that is not ErrNoLeader", got, err, took)
	} else if took > ttl+2*time.Second {
		t.Fatalf("Leader with two nodes of 3 silent returned after %v; want the TTL %v", took, ttl)
	}
}
