package fence_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A Handler over a Redis store admits fence 100, the Redis server is
// killed (SIGKILL) and restarted, and a request with fence 50 comes: a
// server without persistence comes back empty and would admit it, so the
// guard refuses such a server from its first call (ErrNotPersistent, 503)
// unless given AcceptFenceLoss, which then lets 50 through, as its doc
// says. A server with appendonly yes and appendfsync always keeps the
// fence, and 50 is refused. A server that may evict the fence's key
// (maxmemory-policy allkeys-lru) is refused as well, and so is one that
// skips the fsync while it rewrites its AOF or saves a snapshot
// (no-appendfsync-on-rewrite yes): its writes are then acknowledged as
// with appendfsync no.
func TestIntegrationRedisRestart(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	path := func(r *http.Request) string { return r.URL.Path }
	for _, c := range []struct {
		name       string
		cfg        testenv.RedisConfig
		opts       []fence.Option
		persistent bool // the guard takes the server
		keeps      bool // the restart keeps the fence
	}{
		{"without-persistence", testenv.RedisConfig{}, nil, false, false},
		{"everysec", testenv.RedisConfig{Persistence: true, Args: []string{"--appendfsync", "everysec"}}, nil, false, true},
		{"no-appendfsync-on-rewrite", testenv.RedisConfig{Persistence: true, Args: []string{"--no-appendfsync-on-rewrite", "yes"}}, nil, false, true},
		{"allkeys-lru", testenv.RedisConfig{Persistence: true, Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}}, nil, false, true},
		{"volatile-lru", testenv.RedisConfig{Persistence: true, Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"}}, nil, true, true},
		{"without-persistence-accepted", testenv.RedisConfig{}, []fence.Option{fence.AcceptFenceLoss()}, true, false},
		{"appendfsync-always", testenv.RedisConfig{Persistence: true}, nil, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			srv := testenv.StartRedis(t, c.cfg)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			g := fence.NewRedis(goredisconn.New(rdb), c.opts...)
			hs := httptest.NewServer(fence.Handler(g.Store(), path, ok))
			defer hs.Close()
			want := func(f string, code int) {
				t.Helper()
				got, body := send(t, hs.URL+"/ledger", f)
				if got != code {
					t.Fatalf("fence %s: %d %q; want %d", f, got, body, code)
				}
			}
			if !c.persistent {
				err := g.Check(ctx, "ledger", 100)
				if !errors.Is(err, fence.ErrNotPersistent) || !strings.Contains(err.Error(), "AcceptFenceLoss()") {
					t.Fatalf("Check on a server that does not persist every write: %v; want ErrNotPersistent naming AcceptFenceLoss", err)
				}
				t.Logf("Check: %v", err)
				want("100", http.StatusServiceUnavailable)
			} else {
				want("100", http.StatusOK)
			}
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			switch {
			case !c.persistent:
				want("50", http.StatusServiceUnavailable)
				if err := g.Set(ctx, "ledger", 50, "x"); !errors.Is(err, fence.ErrNotPersistent) {
					t.Fatalf("Set after the restart: %v; want ErrNotPersistent", err)
				}
			case c.keeps:
				want("50", http.StatusConflict)
				want("100", http.StatusOK)
			default: // the risk AcceptFenceLoss takes
				want("50", http.StatusOK)
			}
		})
	}
}

// A guard that cannot read the server's configuration refuses as one
// that does not persist: a user without CONFIG GET, and a Conn without a
// Command method. A failure to reach the server is not remembered: once
// the server answers, the guard reads its configuration.
func TestIntegrationRedisPersistenceUnknown(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	srv := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true})
	if _, err := srv.Do("ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "+@all", "-config"); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noconfig", Password: "pw"})
	t.Cleanup(func() { limited.Close() })
	err := fence.NewRedis(goredisconn.New(limited)).Set(ctx, "k", 5, "v")
	if !errors.Is(err, fence.ErrNotPersistent) || !strings.Contains(err.Error(), "refused CONFIG GET") {
		t.Errorf("a user without CONFIG: %v; want ErrNotPersistent saying the server refused CONFIG GET", err)
	}
	if err := fence.NewRedis(goredisconn.New(limited), fence.AcceptFenceLoss()).Set(ctx, "k", 5, "v"); err != nil {
		t.Errorf("a user without CONFIG, with AcceptFenceLoss: %v", err)
	}

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	err = fence.NewRedis(evalOnly{goredisconn.New(rdb)}).Set(ctx, "k", 6, "v")
	if !errors.Is(err, fence.ErrNotPersistent) || !strings.Contains(err.Error(), "Command") {
		t.Errorf("a Conn without Command: %v; want ErrNotPersistent saying so", err)
	}

	g := fence.NewRedis(goredisconn.New(rdb))
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	err = g.Set(ctx, "k", 6, "v")
	if err == nil || errors.Is(err, fence.ErrNotPersistent) {
		t.Errorf("a server that cannot be reached: %v; want its error", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, "k", 6, "v"); err != nil {
		t.Errorf("once the server answers: %v", err)
	}
	if err := g.Set(ctx, "k", 4, "v"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("fence 4 after 5 and 6, across a restart: %v; want ErrStale", err)
	}
}

// evalOnly is a Conn with no Command method.
type evalOnly struct{ redisconn.Conn }
