package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// redisAddr is the address of a redis-server that TestMain starts for the
// examples.
var redisAddr string

func TestMain(m *testing.M) {
	if !testenv.ShortMain() { // the examples need a server
		srv, err := testenv.LaunchRedis(testenv.RedisConfig{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "dlock examples:", err)
			os.Exit(1)
		}
		redisAddr = srv.Addr()
	}
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

// withLock runs work while it holds l, whatever the backend: work gets a
// context that is cancelled if the lease is lost, and the fence to hand to
// the resource it writes.
func withLock(ctx context.Context, l dlock.Locker, work func(ctx context.Context, fence uint64) error) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if err := work(lease.Context(), lease.Fence()); err != nil {
		return err
	}
	// The work finished; did the lease last that long?
	return lease.Err()
}

// Code that takes a lock needs only the dlock interfaces: the backend is
// chosen once, where the Locker is made.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()

	report := locks.NewMutex("nightly-report", redislock.WithMaxHold(time.Hour))
	err := withLock(context.Background(), report, func(ctx context.Context, fence uint64) error {
		fmt.Println("writing the report under", report.Name(), "with a fence:", fence > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// writing the report under nightly-report with a fence: true
	// done: <nil>
}

// A Lock that gives up says why: errors.Is tells a lock held by another
// owner from a context that ran out.
func ExampleErrNotObtained() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks := redislock.New(goredisconn.New(rdb))
	defer locks.Close()

	ctx := context.Background()
	held, err := locks.NewMutex("invoice-42").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer held.Release(ctx)

	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = locks.NewMutex("invoice-42").Lock(ctx)
	fmt.Println(errors.Is(err, dlock.ErrNotObtained), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// MaxAttempts bounds a strategy: here, at most three attempts in all, the
// second 10ms after the first and the third 20ms after the second.
func ExampleMaxAttempts() {
	s := dlock.MaxAttempts(dlock.LinearBackoff(10*time.Millisecond, time.Second), 3)
	for attempt := 1; ; attempt++ {
		wait, ok := s.Backoff(attempt)
		if !ok {
			fmt.Println("give up after attempt", attempt)
			return
		}
		fmt.Println("after attempt", attempt, "wait", wait)
	}
	// Output:
	// after attempt 1 wait 10ms
	// after attempt 2 wait 20ms
	// give up after attempt 3
}
