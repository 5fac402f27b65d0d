package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// exampleAddrs are the addresses of three redis-servers that TestMain
// starts for the examples.
var exampleAddrs []string

func TestMain(m *testing.M) {
	if !testenv.ShortMain() { // the examples need servers
		for range 3 {
			srv, err := testenv.LaunchRedis(testenv.RedisConfig{})
			if err != nil {
				fmt.Fprintln(os.Stderr, "redlock examples:", err)
				testenv.StopAll()
				os.Exit(1)
			}
			// As age does: the examples' nodes pass for servers up an
			// hour, which vote at once, as a long-running deployment's do.
			created := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
			saved, err := srv.Do("LASTSAVE")
			if err == nil {
				_, err = srv.Do("HSET", "dlock:epoch", "created", created, "boot", created, "seen", saved)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "redlock examples:", err)
				testenv.StopAll()
				os.Exit(1)
			}
			exampleAddrs = append(exampleAddrs, srv.Addr())
		}
	}
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

// opener opens a new connection to one address.
type opener func(t testing.TB, addr string) redisconn.Conn

func goRedis(t testing.TB, addr string) redisconn.Conn {
	return goRedisTimeout(t, addr, time.Second)
}

// goRedisTimeout is goRedis with dial, read and write timeouts of d.
func goRedisTimeout(t testing.TB, addr string, d time.Duration) redisconn.Conn {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: d, ReadTimeout: d, WriteTimeout: d})
	t.Cleanup(func() { c.Close() })
	return goredisconn.New(c)
}

func rueidisClient(t testing.TB, addr string) redisconn.Conn {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true, DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second}})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return rueidisconn.New(c)
}

var transports = []struct {
	name string
	open opener
}{{"goredis", goRedis}, {"rueidis", rueidisClient}}

// newClient returns a redlock Client over addrs, each node on its own new
// connection, closed when t ends. Its node timeout is nodeTimeout unless
// opts set one: at the default 50ms, a loaded machine failed tests that
// are about votes, not speed ("reached 0 of 3 nodes" in WithLogger,
// DeposedTokensExpireOneByOne).
func newClient(t testing.TB, addrs []string, open opener, opts ...redlock.ClientOption) *redlock.Client {
	conns := make([]redisconn.Conn, len(addrs))
	for i, a := range addrs {
		conns[i] = open(t, a)
	}
	c := redlock.New(conns, append([]redlock.ClientOption{redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c
}

func addrsOf(servers []*testenv.Redis) []string {
	a := make([]string, len(servers))
	for i, s := range servers {
		a[i] = s.Addr()
	}
	return a
}

// age makes every node look long-lived, as the nodes of a deployment that
// has run for a while are: it writes the epoch hash quorum_acquire.lua
// keeps, saying that the node's data began, and its server started, an
// hour ago, at the LASTSAVE it reads now. Tests of restart detection
// restart nodes afterwards: a restart changes LASTSAVE, and the script
// then reads the real uptime.
func age(t testing.TB, servers []*testenv.Redis) {
	created := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
	for _, s := range servers {
		saved, err := s.Do("LASTSAVE")
		if err == nil {
			_, err = s.Do("HSET", "dlock:epoch", "created", created, "boot", created, "seen", saved)
		}
		if err != nil {
			t.Fatalf("aging %s: %v", s.Addr(), err)
		}
	}
}

// settle waits until every server's LASTSAVE is two seconds old, as
// quorum_acquire.lua waits before it trusts a LASTSAVE reading: tests that
// restore a node's data from a snapshot or an append-only file call it
// before age, so that the restored reading cannot match the restarted
// server's in the same second, a match the script rules out.
func settle(t testing.TB, servers []*testenv.Redis) {
	for _, s := range servers {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			saved, err1 := s.Do("LASTSAVE")
			now, err2 := s.Do("TIME")
			if err := errors.Join(err1, err2); err != nil {
				t.Fatalf("settling %s: %v", s.Addr(), err)
			}
			sec, _, _ := strings.Cut(now, "\n")
			if a, b := atoi(saved), atoi(sec); a > 0 && b > 0 && a <= b-2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: LASTSAVE %s and TIME %s do not settle", s.Addr(), saved, now)
			}
		}
	}
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

func lockKey(name string) string { return "dlock:{" + name + "}" }

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// values returns the lock key's value on each node ("" when absent).
func values(servers []*testenv.Redis, name string) []string {
	v := make([]string, len(servers))
	for i, s := range servers {
		v[i], _ = s.Do("GET", lockKey(name))
	}
	return v
}

func containsToken(vals []string, token string) bool {
	for _, v := range vals {
		if v == token || strings.HasPrefix(v, token) {
			return true
		}
	}
	return false
}

// logBuffer collects what a slog.Logger writes, safely for the goroutines
// of a Client.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// gone waits until no server holds the lock key: Release returns once a
// majority has deleted it, and the other deletes follow in the background.
func gone(t testing.TB, servers []*testenv.Redis, name string) {
	for deadline := time.Now().Add(5 * time.Second); strings.Join(values(servers, name), "") != ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the key is still on some node 5s after Release: %q", values(servers, name))
		}
	}
}

// proxiesFor starts a fault proxy in front of each of addrs, and returns
// them with their addresses. At the test's end each is healed (no
// blackhole, no refusal) and its connections reset, before it closes.
func proxiesFor(t testing.TB, addrs []string) ([]*testenv.Proxy, []string) {
	proxies := make([]*testenv.Proxy, len(addrs))
	via := make([]string, len(addrs))
	for i, a := range addrs {
		proxies[i] = testenv.StartProxy(t, a)
		via[i] = proxies[i].Addr()
		t.Cleanup(func() { proxies[i].Blackhole(false); proxies[i].SetRefuse(false); proxies[i].Reset() })
	}
	return proxies, via
}
