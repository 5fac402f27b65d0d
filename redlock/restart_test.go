package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// Issue 15.3: a node that restarts from a snapshot older than a grant has
// lost that grant's key but kept an old epoch. It must not vote for the
// restart window, or a second holder is granted while the first one's
// lease is valid. Its fence counter comes back old too: once it votes
// again, fences must still increase.
func TestIntegrationSnapshotRestartDoesNotVote(t *testing.T) {
	// Snapshots only when asked (SAVE), and loaded on restart.
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	settle(t, servers)
	age(t, servers)
	a, b, c := servers[0], servers[1], servers[2]
	if _, err := b.Do("SAVE"); err != nil { // before anyone locks: B's snapshot holds its epoch
		t.Fatal(err)
	}
	settle(t, servers[1:2])
	age(t, servers[1:2]) // SAVE moved LASTSAVE: the server's uptime is read again at the new one, and faked again
	ttl, window := 3*time.Second, 3*time.Second
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
			c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(window), redlock.WithLogger(log.logger()))
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

func TestIntegrationDetectionNeedsInfo(t *testing.T) {
	servers := testenv.StartRedisN(t, 1, testenv.RedisConfig{Args: []string{"--rename-command", "LASTSAVE", ""}})
	ctx := timeout(t, 10*time.Second)
	_, err := newClient(t, addrsOf(servers), goRedis).NewMutex("info").TryLock(ctx)
	if err == nil || errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "WithoutRestartDetection") {
		t.Fatalf("TryLock on a node without LASTSAVE = %v; want a hard error naming the fix", err)
	}
	l, err := newClient(t, addrsOf(servers), goRedis, redlock.WithoutRestartDetection()).NewMutex("info").TryLock(ctx)
	if err != nil {
		t.Fatalf("without restart detection: %v", err)
	}
	l.Release(ctx)
}
