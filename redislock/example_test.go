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
	if testenv.ShortMain() { // the examples need a server
		os.Exit(m.Run())
	}
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
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
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
	// Output: holding nightly-report with a fence: true
}

func ExampleMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
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

// A recursive function takes the same lock at every level, through the
// holding lease's context.
func ExampleReentrantMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	menu := locks.NewReentrantMutex("menu-tree")

	var build func(ctx context.Context, depth int) error
	build = func(ctx context.Context, depth int) error {
		lease, err := menu.Lock(ctx)
		if err != nil {
			return err
		}
		defer lease.Release(context.Background())
		if depth < 3 {
			return build(lease.Context(), depth+1) // re-enters: one round trip, no wait
		}
		info, _ := locks.Inspect(ctx, "menu-tree")
		fmt.Println("holds at the deepest level:", info.Holders[0].Holds)
		return nil
	}
	if err := build(context.Background(), 1); err != nil {
		fmt.Println(err)
	}
	info, _ := locks.Inspect(context.Background(), "menu-tree")
	fmt.Println("afterwards:", info.Kind)
	// Output:
	// holds at the deepest level: 3
	// afterwards: free
}

// Items of an inventory share a bounded set of locks.
func ExampleStriped() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	segments := locks.NewStriped("inventory", 16)

	ctx := context.Background()
	lease, err := segments.For("sku-1234").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	fmt.Println(lease.Key() == fmt.Sprintf("inventory:%d", segments.Stripe("sku-1234")))
	// Output: true
}

// Two accounts are locked together, in a fixed order whatever order the
// caller names them in.
func ExampleMultiLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()

	ctx := context.Background()
	transfer := redislock.NewMultiLock(locks.NewMutex("account-b"), locks.NewMutex("account-a"))
	lease, err := transfer.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	fmt.Println(lease.Key())
	// Output: account-a+account-b
}

// Readers share the lock; a writer waits for them, and a waiting writer
// keeps new readers out.
func ExampleRWMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	config := locks.NewRWMutex("config")

	ctx := context.Background()
	r1, _ := config.Reader().Lock(ctx)
	r2, _ := config.Reader().Lock(ctx)
	_, err := config.Writer().TryLock(ctx)
	fmt.Println("writer while two readers hold:", err)
	r1.Release(ctx)
	r2.Release(ctx)

	w, err := config.Writer().Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := config.Downgrade(ctx, w) // keep reading what was just written
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after downgrade, the write lease is:", w.Err())
	r.Release(ctx)
	// Output:
	// writer while two readers hold: dlock: lock not obtained
	// after downgrade, the write lease is: dlock: lock released
}

// At most two exports run at once; a permit held by a crashed process comes
// back when its lease runs out.
func ExampleSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	exports := locks.NewSemaphore("exports", 2)

	ctx := context.Background()
	a, _ := exports.Lock(ctx)
	b, _ := exports.Lock(ctx)
	_, err := exports.TryLock(ctx)
	fmt.Println("third permit:", err)
	left, _ := exports.Available(ctx)
	fmt.Println("available:", left)
	a.Release(ctx)
	b.Release(ctx)
	// Output:
	// third permit: dlock: lock not obtained
	// available: 0
}

// Workers wait until three shards have been loaded.
func ExampleLatch() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	loaded := locks.NewLatch("shards-loaded")

	ctx := context.Background()
	loaded.TrySetCount(ctx, 3)
	for range 3 {
		go loaded.CountDown(ctx) // each loader, when done
	}
	if err := loaded.Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	n, _ := loaded.Count(ctx)
	fmt.Println("all shards loaded; count", n)
	// Output: all shards loaded; count 0
}

// Waiters get the lock in the order they asked for it.
func ExampleFairMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()
	queue := locks.NewFairMutex("ticket-queue")

	ctx := context.Background()
	lease, err := queue.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	info, _ := locks.Inspect(ctx, "ticket-queue")
	fmt.Println(info.Kind, "lock, waiters queued:", info.Waiters)
	lease.Release(ctx)
	// Output: fair-mutex lock, waiters queued: 0
}
