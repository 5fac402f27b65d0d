package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// The quick start runs against a real redis-server named by DLOCK_REDIS:
// it takes the lock, works and releases it; run while another client
// holds the lock, it says so and returns.
func TestIntegrationQuickStart(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	t.Setenv("DLOCK_REDIS", "redis://"+srv.Addr())
	wantLogged(t, runMain(t), "generating the report with fence ")

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := locks.NewMutex("nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the quick start returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	wantLogged(t, runMain(t), "another process holds nightly-report")
}

// runMain runs the example's main and returns what it logged, which also
// goes to stderr, so that a log.Fatal that ends the test binary shows why.
func runMain(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	flags := log.Flags()
	log.SetOutput(io.MultiWriter(&buf, os.Stderr))
	log.SetFlags(0)
	defer func() { log.SetOutput(os.Stderr); log.SetFlags(flags) }()
	start := time.Now()
	main()
	t.Logf("main returned after %v", time.Since(start).Round(time.Millisecond))
	return buf.String()
}

// wantLogged fails t unless out holds want.
func wantLogged(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("main logged %q; want a line with %q", out, want)
	}
}
