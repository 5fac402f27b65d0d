package redlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

// transport opens a new connection to one address.
type transport func(t testing.TB, addr string) redislock.Conn

func goRedis(t testing.TB, addr string) redislock.Conn {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return goredisconn.New(c)
}

func rueidisClient(t testing.TB, addr string) redislock.Conn {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true, DisableRetry: true, Dialer: net.Dialer{Timeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return rueidisconn.New(c)
}

var transports = []struct {
	name string
	open transport
}{{"goredis", goRedis}, {"rueidis", rueidisClient}}

// newClient returns a redlock Client over addrs, each node on its own new
// connection, closed when t ends.
func newClient(t testing.TB, addrs []string, open transport, opts ...redlock.ClientOption) *redlock.Client {
	conns := make([]redislock.Conn, len(addrs))
	for i, a := range addrs {
		conns[i] = open(t, a)
	}
	c := redlock.New(conns, opts...)
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
// has run for a while are: their epoch was created an hour ago. Tests of
// restart detection restart nodes afterwards.
func age(t testing.TB, servers []*testenv.Redis) {
	created := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
	for _, s := range servers {
		if _, err := s.Do("HSET", "dlock:epoch", "id", "test", "created", created); err != nil {
			t.Fatalf("aging %s: %v", s.Addr(), err)
		}
	}
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
