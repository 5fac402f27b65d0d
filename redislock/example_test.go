package redislock_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// redisAddr is the address of a redis-server that TestMain starts for the
// examples.
var redisAddr string

// TestMain starts the examples' server. Without redis-server the package's
// tests are skipped with a message, or fail when CI is set.
func TestMain(m *testing.M) {
	if _, err := testenv.LookBinary("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "SKIP redislock tests:", err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	srv, err := testenv.LaunchRedis(testenv.RedisConfig{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redislock tests:", err)
		os.Exit(1)
	}
	redisAddr = srv.Addr()
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer lease.Release(ctx)

	// Work under the lock. Stop if the lease is lost, and hand the fence to
	// the resource so it can refuse a stale holder.
	select {
	case <-lease.Done():
		fmt.Println("lost:", lease.Err())
	default:
		fmt.Println("holding", lease.Key(), "with a fence:", lease.Fence() > 0)
	}
	// Output: holding dlock:{nightly-report} with a fence: true
}

func ExampleMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()

	ctx := context.Background()
	first, _ := locks.NewMutex("deploy").TryLock(ctx)
	_, err := locks.NewMutex("deploy").TryLock(ctx)
	fmt.Println(err)
	first.Release(ctx)
	// Output: dlock: lock not obtained
}
