package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// countingConn counts the script calls that pass through a Conn.
type countingConn struct {
	redisconn.Conn
	mu    sync.Mutex
	calls map[string]int
	gate  sync.RWMutex // held by a test to stop the client's calls, as a pause of its process would
}

func (c *countingConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.gate.RLock()
	defer c.gate.RUnlock()
	c.mu.Lock()
	for _, call := range calls {
		c.calls[call.Script.Name]++
	}
	c.mu.Unlock()
	c.Conn.Eval(ctx, calls, results)
}

func (c *countingConn) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = map[string]int{}
	return m
}

// Issue 18.4: when nothing failed, a grant takes two round trips, the
// acquire and nothing else: every node's fence counter was incremented by
// the acquire itself, and nodes that saw the same grants agree, so no
// fence is written back. Fences still increase with every grant, across
// clients, and a counter that disagrees is written back once.
func TestIntegrationGrantInOneRound(t *testing.T) {
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	var counters []*countingConn
	newCounted := func() *redlock.Mutex {
		cs := make([]redisconn.Conn, len(servers))
		for i, s := range servers {
			cc := &countingConn{Conn: goRedis(t, s.Addr()), calls: map[string]int{}}
			counters = append(counters, cc)
			cs[i] = cc
		}
		// A generous node timeout: an acquire that times out on a loaded
		// machine may land after its release, and the node holding the
		// stale key then misses a grant and disagrees at the next.
		c := redlock.New(cs, redlock.WithNodeTimeout(time.Second))
		t.Cleanup(func() { c.Close() })
		return c.NewMutex("rounds", redlock.WithTTL(5*time.Second))
	}
	mutexes := []*redlock.Mutex{newCounted(), newCounted()}
	calls := func() map[string]int {
		sum := map[string]int{}
		for _, cc := range counters {
			for k, v := range cc.take() {
				sum[k] += v
			}
		}
		return sum
	}
	// The slot's counters start equal, as those of nodes that have seen
	// the same grants are. (A slot's first grant lifts each node's
	// counter to its clock, rounded up to 100ms: when the nodes' clocks
	// straddle a step, that grant writes back; see the end.)
	for _, s := range servers {
		s.Do("SET", rediskeys.FenceKey("rounds"), fmt.Sprint(time.Now().UnixMicro()))
	}
	s0, _ := servers[0].Do("GET", rediskeys.FenceKey("rounds"))
	for _, s := range servers[1:] {
		s.Do("SET", rediskeys.FenceKey("rounds"), s0)
	}
	var last uint64
	for round := range 20 {
		l, err := mutexes[round%2].Lock(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		holding(t, servers, "rounds", l.Token())
		if l.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		gone(t, servers, "rounds")
		// Lock returns on a majority: the last node's call may still be
		// finishing. Count until all five of this round are in.
		got := calls()
		for end := time.Now().Add(2 * time.Second); got["quorum_acquire"] < 5 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
			for k, v := range calls() {
				got[k] += v
			}
		}
		if got["quorum_acquire"] != 5 {
			t.Errorf("round %d: %d acquire calls; want one per node, 5", round, got["quorum_acquire"])
		}
		if got["quorum_fence"] > 0 {
			t.Errorf("round %d: %d fence write-backs; want none while the nodes' counters agree (%v)", round, got["quorum_fence"], got)
		}
	}

	// Counters that disagree (lost on one node, ahead on another) are
	// lifted and written back, once; the fence still increases. Nodes 3
	// and 4 are taken by someone else, so that every grant rests on nodes
	// 0, 1 and 2, and the one that disagrees counts.
	for _, s := range servers[3:] {
		s.Do("SET", lockKey("rounds"), "foreign", "PX", "60000")
	}
	servers[2].Do("DEL", rediskeys.FenceKey("rounds"))
	servers[1].Do("INCRBY", rediskeys.FenceKey("rounds"), "7")
	var rounds []int
	for round := range 5 {
		l, err := mutexes[0].Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holding(t, servers[:3], "rounds", l.Token())
		if l.Fence() <= last {
			t.Fatalf("after the counters diverged, round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		l.Release(ctx)
		gone(t, servers[:3], "rounds")
		rounds = append(rounds, calls()["quorum_fence"])
	}
	if rounds[0] == 0 || slices.Max(rounds[1:]) > 0 {
		t.Errorf("fence write-back calls in the grants after the counters diverged: %v; want some in the first only", rounds)
	}
	var vals []string
	for _, s := range servers[:3] {
		v, _ := s.Do("GET", rediskeys.FenceKey("rounds"))
		vals = append(vals, v)
	}
	if vals[0] != vals[1] || vals[1] != vals[2] {
		t.Errorf("the counters of the nodes that granted, after the write-back: %v; want them equal", vals)
	}
}

// commandstats returns how many times node s has run each command (INFO
// commandstats, Lua-internal calls included).
func commandstats(t testing.TB, s *testenv.Redis) map[string]int {
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		m[strings.TrimPrefix(name, "cmdstat_")] = atoiInt(n)
	}
	return m
}

func atoiInt(s string) int { return int(atoi(s)) }

// Issue 18.4: an uncontended cycle on a node in service, on a name whose
// slot has a fence counter, runs eight commands on each node: EVALSHA,
// LASTSAVE, HMGET, SET and INCR to acquire, EVALSHA, GET and DEL to
// release. The clock (TIME), INFO and the epoch's HSET are for nodes that
// have not yet been seen to outlast the restart window; a lift on a ripe
// node adds TIME and SET (see TestIntegrationCommandsPerCycleFiveNodes).
func TestIntegrationCommandsPerCycle(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			// Without renewal, and a TTL no cycle outlasts: a renewal
			// that a loaded machine let come due (at TTL/10 when a node
			// had not answered by the grant) adds a refresh, and its
			// script's first EVAL, to the count.
			c, counted := countedClient(t, servers, tr.open, redlock.WithNodeTimeout(time.Second))
			m := c.NewMutex("count-"+tr.name, redlock.WithTTL(20*time.Second), redlock.WithoutRenewal())
			// Lock and Release return on a majority; the test waits for
			// the last node each time (with EXISTS, which the count
			// leaves out), so that no node's acquire lands after its
			// release and the count is exact.
			key := lockKey("count-" + tr.name)
			await := func(want string) { awaitOnEveryNode(t, servers, key, want) }
			cycle := func() {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				await("1")
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				await("0")
			}
			cycle() // the slot's first grant lifts its counters; a node's first acquire marks it ripe
			// The lift rounds each node's clock up to 100ms, and nodes that
			// read it either side of a step disagree; the grant then writes
			// the fence back, but only where its key already is, so a node
			// whose acquire lands late disagrees again at the next grant
			// (quorum_fence once in ten cycles under load). The count
			// begins once every node's counter agrees.
			fence := rediskeys.For("count-" + tr.name).Fence
			agree := func() bool {
				v := make([]string, len(servers))
				for i, s := range servers {
					v[i], _ = s.Do("GET", fence)
				}
				return v[0] != "" && slices.Equal(v, slices.Repeat(v[:1], len(v)))
			}
			for n := 0; !agree(); n++ {
				if n == 10 {
					t.Fatalf("the nodes' fence counters still disagree after %d cycles", n+1)
				}
				cycle()
			}
			for _, c := range counted {
				c.take()
			}
			before := make([]map[string]int, len(servers))
			for i, s := range servers {
				before[i] = commandstats(t, s)
			}
			const cycles = 10
			for range cycles {
				cycle()
			}
			want := map[string]int{"evalsha": 2, "lastsave": 1, "hmget": 1, "set": 1, "incr": 1, "get": 1, "del": 1}
			for i, s := range servers {
				after := commandstats(t, s)
				got := map[string]int{}
				for cmd, n := range after {
					switch d := n - before[i][cmd]; {
					case cmd == "info" || cmd == "exists" || cmd == "config|get" || cmd == "hello":
						// the test's own INFO and EXISTS; the Client's
						// configuration check; a new connection's handshake
					case d != 0:
						got[cmd] = d
					}
				}
				exact := len(got) == len(want)
				for cmd, n := range got {
					exact = exact && n%cycles == 0 && want[cmd] == n/cycles
				}
				if !exact {
					t.Errorf("node %d: %v over %d cycles; want per cycle %v (the client sent the scripts %v)", i, got, cycles, want, counted[i].take())
				}
			}
		})
	}
}

// Issue 18.4: a node whose counter lags (it missed grants) does not lower
// the fence: the grant's majority includes a node that saw the last grant,
// the counters disagree, the largest is taken and written back, and the
// lagging nodes are in step again at the next grant.
func TestIntegrationLaggingCounterDoesNotLowerFence(t *testing.T) {
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	cs := make([]redisconn.Conn, len(servers))
	counted := make([]*countingConn, len(servers))
	for i, s := range servers {
		counted[i] = &countingConn{Conn: goRedis(t, s.Addr()), calls: map[string]int{}}
		cs[i] = counted[i]
	}
	c := redlock.New(cs, redlock.WithNodeTimeout(time.Second))
	t.Cleanup(func() { c.Close() })
	m := c.NewMutex("lag", redlock.WithTTL(5*time.Second))
	fenceWrites := func() int {
		n := 0
		for _, cc := range counted {
			n += cc.take()["quorum_fence"]
		}
		return n
	}
	counter := func(s *testenv.Redis) string {
		v, _ := s.Do("GET", rediskeys.FenceKey("lag"))
		return v
	}
	// Lock and Release return on a majority: each cycle waits for every
	// holder's acquire, so that none lands after the release, and bumps a
	// counter the test has not counted.
	cycle := func(holders []*testenv.Redis) uint64 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		holding(t, holders, "lag", l.Token())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		gone(t, holders, "lag")
		return l.Fence()
	}
	base := time.Now().UnixMicro()
	for _, s := range servers {
		s.Do("SET", rediskeys.FenceKey("lag"), fmt.Sprint(base))
	}
	last := cycle(servers)
	if last != uint64(base)+1 {
		t.Fatalf("fence %d on counters all at %d; want %d", last, base, base+1)
	}
	fenceWrites()

	// Nodes 3 and 4 missed grants; nodes 0 and 1 are held by someone
	// else, so the next grant rests on nodes 2, 3 and 4.
	for _, s := range servers[3:] {
		s.Do("SET", rediskeys.FenceKey("lag"), fmt.Sprint(base-500))
	}
	for _, s := range servers[:2] {
		s.Do("SET", lockKey("lag"), "foreign", "PX", "60000")
	}
	f := cycle(servers[2:])
	if f <= last {
		t.Fatalf("with two of the granting nodes lagging, fence %d after %d", f, last)
	}
	if f != last+1 {
		t.Errorf("fence %d; want %d, node 2's counter after its increment", f, last+1)
	}
	if n := fenceWrites(); n == 0 {
		t.Errorf("no fence write-back while the granting nodes' counters disagreed")
	}
	for i, s := range servers[2:] {
		if got := counter(s); got != fmt.Sprint(f) {
			t.Errorf("node %d's counter after the write-back: %s; want %d", i+2, got, f)
		}
	}
	last = f
	if f = cycle(servers[2:]); f != last+1 {
		t.Errorf("the grant after the write-back: fence %d; want %d", f, last+1)
	}
	if n := fenceWrites(); n != 0 {
		t.Errorf("%d fence write-backs once the counters agreed again; want none", n)
	}
}

// holding waits until every one of servers holds token's key. Lock returns
// on a majority: a test that counts what each node did waits for the
// others' acquires before it releases, so that none lands after the
// release and is counted in the next round.
func holding(t testing.TB, servers []*testenv.Redis, name, token string) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n := 0
		for _, v := range values(servers, name) {
			if strings.HasPrefix(v, token) {
				n++
			}
		}
		if n == len(servers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key is not on every node 5s after Lock: %q", values(servers, name))
		}
	}
}

// Issue 35: an uncontended cycle on five nodes, each on a name whose slot
// no grant has used yet (as lockbench's S4a locks a fresh key per cycle
// on nodes flushed before the run), runs at most maxCommandsFreshSlot
// commands on the nodes in all, Lua-internal included (INFO
// commandstats): on each node EVALSHA, LASTSAVE, HMGET, SET of the key,
// TIME and SET NX of the slot's new counter to acquire, EVALSHA, GET
// and DEL to release. The counter is created at the node's clock in one
// command, not INCR and SET (quorum_acquire.lua): before, each node ran
// INCR, TIME and SET for it, 50 commands in all. (Issue 35's first
// version created it at a floor stored earlier, without TIME, 40 in all;
// an evicted counter then came back below fences granted since, see
// TestIntegrationEvictedCounterDoesNotLowerFence.)
func TestIntegrationCommandsPerCycleFiveNodes(t *testing.T) {
	const maxCommandsFreshSlot = 45
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	c, counted := countedClient(t, servers, goRedis, redlock.WithNodeTimeout(time.Second))
	// Names on slots of their own, none used before.
	var names []string
	used := map[uint16]bool{}
	for i := 0; len(names) < 11; i++ {
		name := fmt.Sprintf("fresh-%d", i)
		if s := rediskeys.Slot(name); !used[s] {
			used[s] = true
			names = append(names, name)
		}
	}
	// Lock and Release return on a majority; the test waits for the last
	// node each time (with EXISTS, which the count leaves out), so that
	// every node's call is in the count.
	await := func(key, want string) { awaitOnEveryNode(t, servers, key, want) }
	cycle := func(name string) {
		m := c.NewMutex(name, redlock.WithTTL(20*time.Second), redlock.WithoutRenewal())
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		await(lockKey(name), "1")
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		await(lockKey(name), "0")
	}
	// The first cycle finds the nodes aged but not yet seen to outlast
	// the window: each reads its clock once and records it.
	cycle(names[0])
	for _, cc := range counted {
		cc.take()
	}
	before := make([]map[string]int, len(servers))
	for i, s := range servers {
		before[i] = commandstats(t, s)
	}
	cycles := len(names) - 1
	for _, name := range names[1 : 1+cycles] {
		cycle(name)
	}
	total := 0
	var per []map[string]int
	for i, s := range servers {
		got := map[string]int{}
		for cmd, n := range commandstats(t, s) {
			switch d := n - before[i][cmd]; {
			case cmd == "info" || cmd == "exists" || cmd == "config|get" || cmd == "hello":
				// the test's own INFO and EXISTS; the Client's
				// configuration check; a new connection's handshake
			case d != 0:
				got[cmd] = d
				total += d
			}
		}
		per = append(per, got)
	}
	// The nodes lift a fresh counter to their clocks rounded to 100ms;
	// when their readings straddle a boundary the counters disagree and
	// the Client writes the largest back (quorum_fence: at most 5 commands
	// a node, its first EVALSHA answered NOSCRIPT and an EVAL included).
	// That is the design's rare cost, allowed here, and counted.
	scripts := make([]map[string]int, len(counted))
	writeBacks := 0
	for i, cc := range counted {
		scripts[i] = cc.take()
		writeBacks += scripts[i]["quorum_fence"]
	}
	perCycle := float64(total) / float64(cycles)
	allowed := maxCommandsFreshSlot + float64(5*writeBacks)/float64(cycles)
	t.Logf("%.1f commands per cycle on %d nodes (%d fence write-backs to a node); by node over %d cycles: %v", perCycle, len(servers), writeBacks, cycles, per)
	if perCycle > allowed {
		t.Errorf("%.1f commands per uncontended cycle on %d nodes; want at most %d, %.1f with %d write-backs (by node over %d cycles: %v; scripts sent: %v)",
			perCycle, len(servers), maxCommandsFreshSlot, allowed, writeBacks, cycles, per, scripts)
	}
}

// A ripe node lifts a slot's new counter, and a counter restored from
// before its boot (below the end of the window that followed it), to its
// clock, whether the Client guesses the slot fresh or has seen its
// counter. An epoch's floor field, which issue 35's first version kept and
// lifted to (see TestIntegrationEvictedCounterDoesNotLowerFence for why it
// no longer does), is ignored, here one from before the boot.
func TestIntegrationRestoredCounterLifted(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	window := 30 * time.Second
	for _, s := range servers {
		if _, err := s.Do("HSET", "dlock:epoch", "ripe", fmt.Sprint(window.Milliseconds()), "floor", "100000"); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), redlock.WithNodeTimeout(time.Second))
	clockLike := func(what string, f uint64) {
		t.Helper()
		if now := uint64(time.Now().UnixMicro()); f+uint64(time.Minute.Microseconds()) < now {
			t.Errorf("%s: fence %d; want the nodes' clock, about %d", what, f, now)
		}
	}
	l, err := c.NewMutex("new-counter", redlock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	clockLike("a new counter on ripe nodes", l.Fence())
	for _, guess := range []bool{true, false} {
		name := fmt.Sprintf("restored-%v", guess)
		m := c.NewMutex(name, redlock.WithoutRenewal())
		if !guess {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l.Release(ctx)
		}
		for _, s := range servers {
			s.Do("SET", rediskeys.FenceKey(name), "5")
		}
		l, err = m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
		clockLike(fmt.Sprintf("%s, a counter restored at 5", name), l.Fence())
	}
}

// Issue 35: an acquire guesses that a slot it has not seen has no fence
// counter yet, and a node that may create it then does so at its clock
// with SET NX. A wrong guess changes no value: a second
// Client's first grant on a slot the first Client used draws the next
// fence. A counter that is not a number fails the acquire, guess or not,
// and leaves no key behind.
func TestIntegrationFreshSlotGuess(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	nodeTimeout := redlock.WithNodeTimeout(time.Second)
	a := newClient(t, addrsOf(servers), goRedis, nodeTimeout)
	lock := func(c *redlock.Client, name string) (uint64, error) {
		l, err := c.NewMutex(name, redlock.WithoutRenewal()).TryLock(ctx)
		if err != nil {
			return 0, err
		}
		return l.Fence(), l.Release(ctx)
	}
	if _, err := lock(a, "guess-ripen"); err != nil { // the nodes are marked ripe, with their floors
		t.Fatal(err)
	}
	var last uint64
	for range 3 {
		f, err := lock(a, "guess")
		if err != nil {
			t.Fatal(err)
		}
		if f <= last {
			t.Fatalf("fence %d after %d", f, last)
		}
		last = f
	}
	// A new Client has seen no counter and guesses that the slot has none:
	// the nodes, which have one, must go on counting rather than lift it to
	// their clock. The grant's fence is then one above some node's counter,
	// not necessarily above last: a node whose answers to a came after its
	// majority lifted its counter itself, at a later 100ms step of its clock,
	// and the grant takes the largest count of its majority.
	b := newClient(t, addrsOf(servers), goRedis, nodeTimeout)
	f, err := lock(b, "guess")
	if err != nil {
		t.Fatal(err)
	}
	var counted uint64
	for _, s := range servers {
		v, _ := s.Do("GET", rediskeys.FenceKey("guess"))
		n, _ := strconv.ParseUint(v, 10, 64)
		counted = max(counted, n)
	}
	if f <= last || f > counted || f%100000 == 0 {
		t.Fatalf("a new Client's grant on a slot in use: fence %d; want above %d, at most the largest counter %d, and counted on, not lifted to a 100ms step", f, last, counted)
	}

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"hash", []string{"HSET", "", "f", "v"}, "WRONGTYPE"},
		{"text", []string{"SET", "", "not a number"}, "does not hold a number"},
	} {
		// a has seen the counter and INCRs it; a new Client guesses.
		for _, c := range []*redlock.Client{a, newClient(t, addrsOf(servers), goRedis, nodeTimeout)} {
			name := "guess"
			fence := rediskeys.FenceKey(name)
			for _, s := range servers {
				// DEL and set in one script: a late call of the round
				// before may otherwise make the counter in between.
				args := append([]string{"EVAL", "redis.call('DEL', KEYS[1]); return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))", "1", fence, tc.set[0]}, tc.set[2:]...)
				if _, err := s.Do(args...); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := lock(c, name); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("counter holding a %s: TryLock = %v; want an error saying %q", tc.name, err, tc.want)
			}
			gone(t, servers, name)
		}
	}
}

// awaitOnEveryNode waits until EXISTS key answers want ("1" or "0") on
// every node, for at most 5s.
func awaitOnEveryNode(t *testing.T, servers []*testenv.Redis, key, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		n := 0
		for _, s := range servers {
			if v, _ := s.Do("EXISTS", key); v == want {
				n++
			}
		}
		if n == len(servers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EXISTS %s is not %s on every node after 5s", key, want)
		}
	}
}
