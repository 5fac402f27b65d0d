package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/exampletest"
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
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

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
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "another process holds nightly-report")
}
