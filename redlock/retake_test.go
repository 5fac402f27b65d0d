package redlock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// countedClient returns a Client over servers whose Conns count the
// scripts they send, and the counters.
func countedClient(t testing.TB, servers []*testenv.Redis, open opener, opts ...redlock.ClientOption) (*redlock.Client, []*countingConn) {
	cs := make([]redisconn.Conn, len(servers))
	counted := make([]*countingConn, len(servers))
	for i, s := range servers {
		counted[i] = &countingConn{Conn: open(t, s.Addr()), calls: map[string]int{}}
		cs[i] = counted[i]
	}
	c := redlock.New(cs, opts...)
	t.Cleanup(func() { c.Close() })
	return c, counted
}

// sum takes and adds up the counts of script name over counted.
func sum(counted []*countingConn, name string) int {
	n := 0
	for _, cc := range counted {
		n += cc.take()[name]
	}
	return n
}

// holdsOn returns how many of servers hold token's key for name.
func holdsOn(servers []*testenv.Redis, name, token string) int {
	n := 0
	for _, v := range values(servers, name) {
		if v == token {
			n++
		}
	}
	return n
}

// A holder that won on a bare majority, because a competitor's failed
// attempt held the third node at its grant, takes that node once it is
// free, at its next renewal (or Refresh): then one node that loses the key
// (a forward jump of its clock, here PEXPIRE 1) no longer lets another
// client take the lock while the lease is valid. Without the retake the
// holder stands on two nodes for its whole lease, and the other client
// wins the freed node and the expired one: a double grant.
func TestIntegrationRetakeAfterContestedGrant(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const ttl = 3 * time.Second
	for _, tr := range transports {
		for _, how := range []string{"watchdog", "Refresh"} {
			t.Run(tr.name+"/"+how, func(t *testing.T) {
				name := "contested-" + tr.name + "-" + how
				ctx := timeout(t, 30*time.Second)
				slow := redlock.WithNodeTimeout(time.Second) // the test is about votes, not speed
				opts := []redlock.Option{redlock.WithTTL(ttl)}
				if how == "Refresh" {
					opts = append(opts, redlock.WithoutRenewal())
				}
				// Node 2 is held by a competitor's attempt at the grant.
				servers[2].Do("SET", lockKey(name), "competitor", "PX", "60000")
				a, err := newClient(t, addrsOf(servers), tr.open, slow).NewMutex(name, opts...).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				holding(t, servers[:2], name, a.Token())
				servers[2].Do("DEL", lockKey(name)) // the failed attempt's clean-up
				if how == "Refresh" {
					if err := a.Refresh(ctx); err != nil {
						t.Fatal(err)
					}
				}
				// One renewal period (TTL/3) and some: the retake follows
				// the renewal's reply.
				for deadline := time.Now().Add(ttl/3 + time.Second); holdsOn(servers, name, a.Token()) < 3; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Errorf("%v after the grant (renewal every %v) the nodes hold %q; want the holder's token on all three",
							ttl/3+time.Second, ttl/3, values(servers, name))
						break
					}
				}
				servers[0].Do("PEXPIRE", lockKey(name), "1") // node 0 loses the key early
				time.Sleep(10 * time.Millisecond)
				b, err := newClient(t, addrsOf(servers), tr.open, slow).NewMutex(name, redlock.WithTTL(ttl)).TryLock(ctx)
				if err == nil {
					t.Errorf("double grant: B holds the lock (fence %d) while A's lease (fence %d) is valid until %v (A's Err %v); nodes %q",
						b.Fence(), a.Fence(), time.Until(a.Until()).Round(time.Millisecond), a.Err(), values(servers, name))
					b.Release(ctx)
				} else if !errors.Is(err, dlock.ErrNotObtained) {
					t.Errorf("B's TryLock = %v; want ErrNotObtained", err)
				}
				if a.Err() != nil {
					t.Errorf("A's lease ended: %v", a.Err())
				}
				if err := a.Release(ctx); err != nil {
					t.Fatal(err)
				}
				gone(t, servers, name)
			})
		}
	}
}

// A grant that a node refused is first renewed after TTL/10, not TTL/3,
// so that it takes back sooner the node a competitor's attempt held: with
// a 30s TTL, the holder stands on all three nodes well within 7s of the
// grant, where the usual first renewal comes after 10s.
func TestIntegrationBareGrantRenewsEarly(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const ttl = 30 * time.Second
	ctx := timeout(t, 30*time.Second)
	servers[2].Do("SET", lockKey("bare"), "competitor", "PX", "60000")
	scripts := func() int { s := commandstats(t, servers[2]); return s["evalsha"] + s["eval"] }
	before := scripts()
	a, err := newClient(t, addrsOf(servers), goRedis).NewMutex("bare", redlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	// The grant needs two nodes: the acquire on node 2 may run after it,
	// and would take the key itself if the competitor's were gone.
	for scripts() == before {
		if time.Since(granted) > 5*time.Second {
			t.Fatal("the acquire never reached node 2")
		}
		time.Sleep(time.Millisecond)
	}
	servers[2].Do("DEL", lockKey("bare")) // the failed attempt's clean-up
	for holdsOn(servers, "bare", a.Token()) < 3 {
		if time.Since(granted) > 7*time.Second {
			t.Fatalf("7s after a grant on two nodes of three the nodes hold %q; want the holder's token on all three after its first renewal (TTL/10 = %v)",
				values(servers, "bare"), ttl/10)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("on all three nodes %v after the grant", time.Since(granted).Round(time.Millisecond))
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, servers, "bare")
}

// A key of another owner on a node is never overwritten: the renewal's
// reply tells it from an absent key, and no retake is even sent.
func TestIntegrationRetakeLeavesOtherOwnersKey(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const ttl = 1200 * time.Millisecond
	ctx := timeout(t, 30*time.Second)
	c, counted := countedClient(t, servers, goRedis, redlock.WithNodeTimeout(300*time.Millisecond))
	servers[2].Do("SET", lockKey("other"), "other-owner", "PX", "60000")
	a, err := c.NewMutex("other", redlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holding(t, servers[:2], "other", a.Token())
	time.Sleep(4 * ttl / 3) // four renewals
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if v := values(servers, "other"); v[0] != a.Token() || v[1] != a.Token() || v[2] != "other-owner" {
		t.Errorf("after four renewals and a Refresh the nodes hold %q; want A's token on nodes 0 and 1, the other owner's on node 2", v)
	}
	if pttl, _ := servers[2].Do("PTTL", lockKey("other")); atoi(pttl) < 50000 {
		t.Errorf("the other owner's key has %sms left; want its own TTL, untouched", pttl)
	}
	if n := sum(counted, "quorum_retake"); n != 0 {
		t.Errorf("%d retake calls for a node that another owner holds; want none", n)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := values(servers, "other"); v[2] != "other-owner" {
		t.Errorf("after the release node 2 holds %q; want the other owner's key", v[2])
	}
}

// Keys deleted on a majority (an operator's force-unlock) are not taken
// back: no majority extended the lease, so the next renewal ends it with
// ErrTakenOver, and no key is left on any node once the key the third node
// held has expired (within the TTL from the last extension, which came
// before the loss). The nodes that lost the key never get it back.
func TestIntegrationForceUnlockOnMajorityNotRetaken(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const ttl = 1500 * time.Millisecond
	ctx := timeout(t, 30*time.Second)
	c, counted := countedClient(t, servers, goRedis, redlock.WithNodeTimeout(500*time.Millisecond))
	a, err := c.NewMutex("forced", redlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holding(t, servers, "forced", a.Token())
	// No renewal may fall between the two deletes (one that saw one node
	// without the key and two with it would rightly take it back): the
	// client's calls stop while they run, as a pause of its process would
	// stop them, once those under way have returned.
	for _, cc := range counted {
		cc.gate.Lock()
	}
	for _, s := range servers[:2] {
		s.Do("DEL", lockKey("forced"))
	}
	deleted := time.Now()
	for _, cc := range counted {
		cc.gate.Unlock()
	}
	retaken := false
	for ended := false; !ended; {
		select {
		case <-a.Done():
			ended = true
		case <-time.After(5 * time.Millisecond):
		}
		if holdsOn(servers[:2], "forced", a.Token()) > 0 {
			retaken = true
		}
		if time.Since(deleted) > 2*ttl {
			t.Fatalf("the lease is still held %v after its key was deleted on two of three nodes: %q", 2*ttl, values(servers, "forced"))
		}
	}
	if !errors.Is(a.Err(), dlock.ErrTakenOver) {
		t.Errorf("Err after the key was deleted on two of three nodes = %v; want ErrTakenOver", a.Err())
	}
	t.Logf("the lease ended %v after the deletes (renewal every %v)", time.Since(deleted).Round(time.Millisecond), ttl/3)
	if retaken {
		t.Errorf("a node whose key was deleted got it back: %q", values(servers, "forced"))
	}
	// Horizon: the third node's key expires within the TTL of its last
	// extension, which came before the lease ended.
	horizon := time.Now().Add(ttl + 200*time.Millisecond)
	for ; ; time.Sleep(10 * time.Millisecond) {
		v := values(servers, "forced")
		if strings.Join(v[:2], "") != "" {
			t.Fatalf("after the loss nodes 0 and 1 hold %q; want nothing", v[:2])
		}
		if strings.Join(v, "") == "" {
			break
		}
		if time.Now().After(horizon) {
			t.Fatalf("a TTL (%v) after the lease ended the nodes hold %q; want nothing", ttl, v)
		}
	}
	if n := sum(counted, "quorum_retake"); n != 0 {
		t.Errorf("%d retake calls; want none, since no majority extended the lease after the deletes", n)
	}
}

// expiredKeys returns the expired_keys of INFO stats: how many keys s has
// expired since it started.
func expiredKeys(t testing.TB, s *testenv.Redis) int64 {
	info, err := s.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "expired_keys:"); ok {
			return atoi(v)
		}
	}
	t.Fatalf("no expired_keys in INFO stats of %s", s.Addr())
	return 0
}

// Releases racing renewals and their retakes leave no key behind: many
// short leases with frequent renewals, node 2's key deleted by hand after
// each grant, so that renewals retake it, released at random points of
// their renewal period. Node 2 is behind a proxy that delays each way by
// 30ms: a renewal is decided on nodes 0 and 1 before node 2 answers, and
// its retake of node 2 follows node 2's late reply, so that a Release
// often comes between the renewal and its retake. A retake sent after the
// release's delete would leave a key that then expires: every key the test
// makes is deleted instead (by a release, the clean-up, or the test), so
// no node may expire any (expired_keys stays the same). After Close no
// node holds a key.
func TestIntegrationReleaseRacingRetakesLeavesNoKey(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const (
		ttl     = 300 * time.Millisecond // a renewal every 100ms
		workers = 4
		rounds  = 25
	)
	ctx := timeout(t, 60*time.Second)
	slow := testenv.StartProxy(t, servers[2].Addr())
	slow.SetLatency(30 * time.Millisecond)
	cs := make([]redisconn.Conn, len(servers))
	counted := make([]*countingConn, len(servers))
	for i, s := range servers {
		addr := s.Addr()
		if i == 2 {
			addr = slow.Addr()
		}
		counted[i] = &countingConn{Conn: goRedis(t, addr), calls: map[string]int{}}
		cs[i] = counted[i]
	}
	c := redlock.New(cs, redlock.WithNodeTimeout(100*time.Millisecond))
	t.Cleanup(func() { c.Close() })
	expiredBefore := make([]int64, len(servers))
	for i, s := range servers {
		expiredBefore[i] = expiredKeys(t, s)
	}
	var (
		mu       sync.Mutex
		notHeld  []string // leases that ended before their Release
		released int
	)
	names := make([]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		names[w] = fmt.Sprintf("race-%d", w)
		wg.Go(func() {
			m := c.NewMutex(names[w], redlock.WithTTL(ttl))
			for r := range rounds {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				ended := false
				for deadline := time.Now().Add(5 * time.Second); holdsOn(servers, names[w], l.Token()) < 3; time.Sleep(time.Millisecond) {
					if l.Err() != nil {
						// Its renewals missed (TTL 300ms on a loaded
						// machine): the key expired before every node
						// had it, and this round races nothing.
						ended = true
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s round %d: the key is not on every node 5s after Lock: %q", names[w], r, values(servers, names[w]))
						break
					}
				}
				if ended {
					l.Release(ctx)
					mu.Lock()
					notHeld = append(notHeld, fmt.Sprintf("%s round %d: %v before every node had the key", names[w], r, l.Err()))
					mu.Unlock()
					continue
				}
				servers[2].Do("DEL", lockKey(names[w]))
				time.Sleep(rand.N(2 * ttl / 3))
				err = l.Release(ctx)
				mu.Lock()
				if err != nil {
					notHeld = append(notHeld, fmt.Sprintf("%s round %d: %v", names[w], r, err))
				} else {
					released++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	retakes := sum(counted, "quorum_retake")
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("%d leases released, %d retake calls; Close took %v", released, retakes, time.Since(start).Round(time.Millisecond))
	for _, name := range names {
		if left := leftKeys(t, servers, name); len(left) > 0 {
			t.Errorf("after Close: %s", strings.Join(left, "; "))
		}
	}
	if retakes == 0 {
		t.Errorf("no retake call in %d leases whose key was deleted on one node; the test raced nothing", released)
	}
	if len(notHeld) > 0 {
		// A lease that ran out (a loaded machine) leaves keys that expire:
		// the count below cannot tell them from a late retake's.
		t.Logf("not every lease was held at its release: %s; expired_keys not checked", strings.Join(notHeld, "; "))
		return
	}
	time.Sleep(ttl + 200*time.Millisecond) // a late retake's key expires (the server expires keys every 100ms)
	for i, s := range servers {
		if n := expiredKeys(t, s) - expiredBefore[i]; n != 0 {
			t.Errorf("node %d expired %d lock keys: keys of released leases were left behind", i, n)
		}
	}
}

// A retake costs nothing while every node holds the key: a lease held
// through several renewals, its key on all three nodes, sends no retake
// call. (An uncontended loop of Lock and Release is not enough: under
// load a Release returns before its third delete lands, the next grant
// finds the old key there, and its first renewal rightly retakes that
// node.)
func TestIntegrationNoRetakeWhileEveryNodeHolds(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	const ttl = 1500 * time.Millisecond // a renewal every 500ms
	ctx := timeout(t, 30*time.Second)
	c, counted := countedClient(t, servers, goRedis, redlock.WithNodeTimeout(500*time.Millisecond))
	a, err := c.NewMutex("steady", redlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); holdsOn(servers, "steady", a.Token()) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("5s after the grant the nodes hold %q; want the token on all three", values(servers, "steady"))
		}
	}
	for _, cc := range counted {
		cc.take()
	}
	time.Sleep(5 * ttl / 3) // five renewals
	calls := map[string]int{}
	for _, cc := range counted {
		for k, v := range cc.take() {
			calls[k] += v
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if calls["quorum_refresh"] < 3*3 {
		t.Errorf("%d refresh calls to three nodes in five renewal periods; want at least 9", calls["quorum_refresh"])
	}
	if calls["quorum_retake"] != 0 {
		t.Errorf("%d retake calls while every node held the key; want none", calls["quorum_retake"])
	}
}
