package redlock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// Issue 15.3: a node that restarts from a snapshot older than a grant has
// lost that grant's key but kept an old epoch. It must not vote for the
// restart window, or a second holder is granted while the first one's
// lease is valid. Its fence counter comes back old too: once it votes
// again, fences must still increase.
func TestIntegrationSnapshotRestartDoesNotVote(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	// Snapshots only when asked (SAVE), and loaded on restart.
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	settle(t, servers)
	age(t, servers)
	a, b, c := servers[0], servers[1], servers[2]
	if _, err := b.Do("SAVE"); err != nil { // before anyone locks: B's snapshot holds its epoch
		t.Fatal(err)
	}
	settle(t, servers[1:2])
	age(t, servers[1:2])                        // SAVE moved LASTSAVE: the server's uptime is read again at the new one, and faked again
	ttl, window := 5*time.Second, 5*time.Second // room for a slow restart of B before H2 tries
	ctx := timeout(t, 30*time.Second)

	// H1 acquires while C is cut off from it: it holds A and B.
	proxyC := testenv.StartProxy(t, c.Addr())
	// A generous node timeout: the attempt is decided by A and B, and a
	// loaded machine must not make them miss it.
	slow := redlock.WithNodeTimeout(500 * time.Millisecond)
	h1c := newClientConns(t, []string{a.Addr(), b.Addr(), proxyC.Addr()}, redlock.WithRestartWindow(window), slow)
	proxyC.Blackhole(true)
	h1, err := h1c.NewMutex("snapshot", redlock.WithTTL(ttl), redlock.WithoutRenewal()).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns on A's and B's votes; on a busy machine the request
	// to C may not have been written yet. Past the node timeout it has been
	// dropped, or never sent: only then may C hear again.
	time.Sleep(600 * time.Millisecond)
	proxyC.Blackhole(false)
	if v := values(servers, "snapshot"); v[0] != h1.Token() || v[1] != h1.Token() || v[2] != "" {
		t.Fatalf("nodes hold %q; want H1's token on A and B only", v)
	}
	// B dies and comes back from its snapshot: H1's key is gone from it.
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Do("HGET", "dlock:epoch", "created"); v == "" {
		t.Fatal("B came back without the epoch its snapshot held; the test needs it restored")
	}
	h2c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), slow)
	h2m := h2c.NewMutex("snapshot", redlock.WithTTL(ttl), redlock.WithoutRenewal())
	h2, err := h2m.TryLock(ctx)
	if err == nil {
		t.Fatalf("H2 granted (fence %d) on B, restarted from an old snapshot, and C, while H1's lease has %v left",
			h2.Fence(), time.Until(h1.Until()).Round(time.Millisecond))
	}
	if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "may not vote yet") ||
		!strings.Contains(err.Error(), b.Addr()+" restarted") {
		t.Fatalf("H2's TryLock = %v; want ErrNotObtained saying that %s restarted and may not vote yet", err, b.Addr())
	}
	t.Logf("refused while H1 holds: %v", err)

	// After H1 and the window: A is down, so the grant rests on B (its
	// counter restored from before H1) and C (which missed H1).
	// H1's key is left on A alone, no majority: its Release says so.
	if err := h1.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("H1's Release with its key on A alone = %v; want ErrNotHeld", err)
	}
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	h2, err = h2m.Lock(timeout(t, window+5*time.Second))
	if err != nil {
		t.Fatalf("Lock after the restart window: %v", err)
	}
	if h2.Fence() <= h1.Fence() {
		t.Errorf("fence %d on B (restored from a snapshot) and C, after H1's %d", h2.Fence(), h1.Fence())
	}
	h2.Release(ctx)
}

// newClientConns is newClient over go-redis connections to addrs.
func newClientConns(t testing.TB, addrs []string, opts ...redlock.ClientOption) *redlock.Client {
	return newClient(t, addrs, goRedis, opts...)
}

// waitUptime waits until every server has been up for at least d, by its
// own INFO.
func waitUptime(t testing.TB, servers []*testenv.Redis, d time.Duration) {
	for _, s := range servers {
		for {
			info, err := s.Do("INFO", "server")
			if err != nil {
				t.Fatal(err)
			}
			up := -1
			for line := range strings.Lines(info) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
					up, _ = strconv.Atoi(v)
				}
			}
			// The script counts the whole seconds less one: what INFO
			// says is at most a second more than the real uptime.
			if time.Duration(up-1)*time.Second >= d {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Issue 17.3: nodes that have run longer than the restart window vote at
// once, even new to dlock (no epoch yet); a node restarted within the
// window still abstains, and the error says which, why and for how long.
func TestIntegrationNewDeploymentGrantsAtOnce(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	window := time.Second
	waitUptime(t, servers, window)
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window))
	m := c.NewMutex("first", redlock.WithTTL(window))
	start := time.Now()
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("first TryLock on nodes up longer than the window: %v", err)
	}
	t.Logf("first lock of a new deployment granted in %v, fence %d", time.Since(start), l.Fence())
	l.Release(ctx)

	// A node restarted empty within the window abstains; with another
	// node taken, its vote is needed.
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	servers[1].Do("SET", lockKey("first"), "foreign", "PX", "60000")
	_, err = m.TryLock(ctx)
	if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), servers[0].Addr()+" restarted") ||
		!strings.Contains(err.Error(), "votes in") {
		t.Fatalf("TryLock with a just-restarted node needed = %v; want ErrNotObtained naming it, with the time left", err)
	}
	t.Logf("refused: %v", err)
	if l, err = m.Lock(timeout(t, window+5*time.Second)); err != nil {
		t.Fatalf("Lock once the window has passed: %v", err)
	}
	l.Release(ctx)

	// The window bounds every TTL of the Client.
	_, err = c.NewMutex("long", redlock.WithTTL(2*window)).TryLock(ctx)
	if err == nil || !strings.Contains(err.Error(), "WithRestartWindow") {
		t.Errorf("TryLock with a TTL above the window = %v; want an error naming WithRestartWindow", err)
	}
	if _, err := redlock.New([]redisconn.Conn{goRedis(t, servers[0].Addr())}, redlock.WithRestartWindow(0)).NewMutex("x").TryLock(ctx); err == nil ||
		!strings.Contains(err.Error(), "must be positive") {
		t.Errorf("a zero restart window = %v; want an error", err)
	}
}

// A node that lost its data without a restart (FLUSHALL) abstains for the
// window if this Client had seen its epoch before; a Client that had not
// cannot tell it from a node new to dlock, and lets it vote (a documented
// limit).
func TestIntegrationFlushedNodeAbstains(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	window := 2 * time.Second
	// Node 1 is taken by someone else throughout: every grant needs the
	// votes of nodes 0 and 2, so the Client hears from both.
	servers[1].Do("SET", lockKey("flushed"), "foreign", "PX", "60000")
	// What is tested is epochs, not speed: a node timeout of a second, not
	// the default 50ms, which a loaded machine's round trip outlasted.
	nodeTimeout := redlock.WithNodeTimeout(time.Second)
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), nodeTimeout)
	m := c.NewMutex("flushed", redlock.WithTTL(window))
	l, err := m.TryLock(ctx) // the client sees node 0's epoch
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if _, err := servers[0].Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	// Its server has run long (as age says); only its data is new.
	age(t, servers[0:1])
	servers[0].Do("HDEL", "dlock:epoch", "created")
	_, err = m.TryLock(ctx)
	if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), servers[0].Addr()+" lost its data") {
		t.Fatalf("TryLock needing the flushed node = %v; want ErrNotObtained saying it lost its data", err)
	}
	gone(t, []*testenv.Redis{servers[0], servers[2]}, "flushed") // the refused attempt's keys, deleted in the background
	other := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), nodeTimeout).NewMutex("flushed", redlock.WithTTL(window))
	if l, err = other.TryLock(ctx); err != nil {
		t.Fatalf("a Client that never saw the node's old epoch: %v; the documented limit is that it votes", err)
	}
	l.Release(ctx)
}

// A node that persists every write before it answers (appendonly yes,
// appendfsync always) lost nothing in a restart: once the Client has read
// its configuration, it votes at once after the restart. A node that
// refuses CONFIG GET cannot be told from one that does not persist, and
// abstains; the Client logs why.
func TestIntegrationFsyncAlwaysVotesAfterRestart(t *testing.T) {
	ctx := timeout(t, 30*time.Second)
	window := 5 * time.Second
	for _, tc := range []struct {
		name   string
		args   []string
		voting bool
	}{
		{"config readable", nil, true},
		{"CONFIG renamed", []string{"--rename-command", "CONFIG", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{Persistence: true, Args: tc.args})
			settle(t, servers)
			age(t, servers)
			log := &logBuffer{}
			// The test is about votes, not speed: a node timeout that a
			// loaded machine meets (at 50ms: "reached 0 of 3 nodes").
			c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), redlock.WithLogger(log.logger()),
				redlock.WithNodeTimeout(time.Second))
			m := c.NewMutex("aof", redlock.WithTTL(window))
			l, err := m.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l.Release(ctx)
			gone(t, servers, "aof") // Release returns at a majority: the last delete must be on disk before the kill
			redlock.AwaitConfig(c)
			if err := servers[0].Kill(); err != nil {
				t.Fatal(err)
			}
			if err := servers[0].Restart(); err != nil {
				t.Fatal(err)
			}
			servers[1].Do("SET", lockKey("aof"), "foreign", "PX", "60000")
			l, err = m.TryLock(ctx)
			if got := err == nil; got != tc.voting {
				t.Fatalf("TryLock needing the restarted node: %v; want it to vote: %v", err, tc.voting)
			}
			if err == nil {
				l.Release(ctx)
			} else if !strings.Contains(err.Error(), "restarted") {
				t.Errorf("refusal %v does not say the node restarted", err)
			}
			if !tc.voting && !strings.Contains(log.String(), "refused CONFIG GET") {
				t.Errorf("the log does not say that the node refused CONFIG GET:\n%s", log)
			}
		})
	}
}

// A node that may evict keys (maxmemory with a policy other than
// noeviction) can lose a lock key and vote for a second holder: the Client
// warns, once per node.
func TestIntegrationEvictionWarning(t *testing.T) {
	ctx := timeout(t, 30*time.Second)
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "noeviction"} {
		t.Run(policy, func(t *testing.T) {
			servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", policy}})
			age(t, servers)
			log := &logBuffer{}
			c := newClient(t, addrsOf(servers), goRedis, redlock.WithLogger(log.logger()), redlock.WithNodeTimeout(time.Second))
			for range 2 {
				l, err := c.NewMutex("evict").TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				l.Release(ctx)
			}
			redlock.AwaitConfig(c)
			warnings := strings.Count(log.String(), "may evict lock keys")
			if want := map[bool]int{true: 0, false: 3}[policy == "noeviction"]; warnings != want {
				t.Errorf("%d eviction warnings; want %d:\n%s", warnings, want, log)
			}
			if policy != "noeviction" && !strings.Contains(log.String(), "level=WARN") {
				t.Errorf("the eviction warning is not at Warn:\n%s", log)
			}
		})
	}
}

func TestIntegrationDetectionNeedsInfo(t *testing.T) {
	servers := testenv.StartRedisN(t, 1, testenv.RedisConfig{Args: []string{"--rename-command", "LASTSAVE", ""}})
	ctx := timeout(t, 10*time.Second)
	_, err := newClient(t, addrsOf(servers), goRedis, redlock.WithNodeTimeout(time.Second)).NewMutex("info").TryLock(ctx)
	if err == nil || errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "WithoutRestartDetection") {
		t.Fatalf("TryLock on a node without LASTSAVE = %v; want a hard error naming the fix", err)
	}
	l, err := newClient(t, addrsOf(servers), goRedis, redlock.WithoutRestartDetection(), redlock.WithNodeTimeout(time.Second)).NewMutex("info").TryLock(ctx)
	if err != nil {
		t.Fatalf("without restart detection: %v", err)
	}
	l.Release(ctx)
}
