package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/exampletest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The Redlock example runs against three real redis-servers named by
// DLOCK_REDIS: it takes the lock, works and releases it; run while another
// client holds the lock, it says so and returns.
func TestIntegrationRedlockExample(t *testing.T) {
	var urls []string
	var nodes []redisconn.Conn
	for _, srv := range testenv.StartRedisN(t, 3, testenv.RedisConfig{}) {
		// As redlock's own examples do: the nodes pass for servers up an
		// hour, which vote at once, as a long-running deployment's do (a new
		// one grants its first lock a restart window after its first use).
		created := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
		saved, err := srv.Do("LASTSAVE")
		if err == nil {
			_, err = srv.Do("HSET", "dlock:epoch", "created", created, "boot", created, "seen", saved)
		}
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "redis://"+srv.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, goredisconn.New(rdb))
	}
	t.Setenv("DLOCK_REDIS", strings.Join(urls, ","))
	locks := redlock.New(nodes)
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The nodes load the scripts once, as a deployment's long since have:
	// the example's TryLock, within its 50ms node timeout, then makes
	// connections and runs them, as a cron job's does.
	warm, err := locks.NewMutex("warm-up").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warm.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

	held, err := locks.NewMutex("nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "nightly-report not obtained: ")
}
