package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// zkServer is a standalone ZooKeeper server that TestMain starts for the
// examples and the tests that inject no faults; zkAddr is its address.
var (
	zkServer *testenv.ZooKeeper
	zkAddr   string
)

// sharedZK returns the shared server, and skips t under -short, when
// TestMain starts none.
func sharedZK(t testing.TB) *testenv.ZooKeeper {
	t.Helper()
	testenv.SkipIfShort(t, "needs ZooKeeper")
	return zkServer
}

// TestMain starts the shared server. Without ZooKeeper the package's tests
// are skipped with a message, or fail when CI is set.
func TestMain(m *testing.M) {
	if testenv.ShortMain() { // the examples need a server
		os.Exit(m.Run())
	}
	if err := testenv.LookZooKeeper(); err != nil {
		fmt.Fprintln(os.Stderr, "SKIP zklock tests:", err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	z, err := testenv.LaunchZooKeeper()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zklock tests:", err)
		os.Exit(1)
	}
	zkServer, zkAddr = z, z.Addr()
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}

func Example() {
	ctx := context.Background()
	locks, err := zklock.New(ctx, []string{zkAddr}) // one Client per process
	if err != nil {
		fmt.Println("no session:", err)
		return
	}
	defer locks.Close()

	lease, err := locks.NewMutex("/locks/nightly-report").Lock(ctx)
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
	// Output: holding /locks/nightly-report with a fence: true
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	a, _ := zklock.New(ctx, []string{zkAddr})
	defer a.Close()
	b, _ := zklock.New(ctx, []string{zkAddr})
	defer b.Close()

	held, _ := a.NewMutex("/locks/cron").TryLock(ctx)
	_, err := b.NewMutex("/locks/cron").TryLock(ctx)
	fmt.Println("second session:", errors.Is(err, dlock.ErrNotObtained))
	held.Release(ctx)
	// Output: second session: true
}

// A recursive function takes the same lock at every level: the lease's
// Context carries its owner, so the ReentrantMutex takes another hold.
func ExampleReentrantMutex() {
	ctx := context.Background()
	locks, _ := zklock.New(ctx, []string{zkAddr})
	defer locks.Close()
	menu := locks.NewReentrantMutex("/locks/menu-tree")

	var first uint64
	var build func(ctx context.Context, depth int) error
	build = func(ctx context.Context, depth int) error {
		lease, err := menu.Lock(ctx) // depth 1 takes the lock; deeper levels re-enter
		if err != nil {
			return err
		}
		defer lease.Release(context.Background())
		if depth == 1 {
			first = lease.Fence()
		}
		fmt.Println("depth", depth, "same fence:", lease.Fence() == first)
		if depth < 3 {
			return build(lease.Context(), depth+1)
		}
		return nil
	}
	if err := build(ctx, 1); err != nil {
		fmt.Println(err)
	}
	// Output:
	// depth 1 same fence: true
	// depth 2 same fence: true
	// depth 3 same fence: true
}

func ExampleRWMutex() {
	ctx := context.Background()
	locks, _ := zklock.New(ctx, []string{zkAddr})
	defer locks.Close()
	config := locks.NewRWMutex("/locks/config")

	w, _ := config.Writer().Lock(ctx)
	// ... write, then keep reading without letting another writer in:
	r, err := config.Downgrade(ctx, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	other, _ := config.Reader().TryLock(ctx) // readers share
	fmt.Println("write lease:", w.Err(), "| readers:", r.Err() == nil && other != nil)
	_, err = config.Writer().TryLock(ctx)
	fmt.Println("writer while read:", errors.Is(err, dlock.ErrNotObtained))
	r.Release(ctx)
	other.Release(ctx)
	// Output:
	// write lease: dlock: lock released | readers: true
	// writer while read: true
}

func ExampleSemaphore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	locks, _ := zklock.New(ctx, []string{zkAddr})
	defer locks.Close()
	exports := locks.NewSemaphore("/locks/exports", 2) // at most two at a time

	a, _ := exports.Lock(ctx)
	b, _ := exports.Lock(ctx)
	_, err := exports.TryLock(ctx)
	fmt.Println("third:", errors.Is(err, dlock.ErrNotObtained), "| fences differ:", a.Fence() != b.Fence())
	a.Release(ctx)
	c, _ := exports.TryLock(ctx)
	fmt.Println("after a release:", c != nil)
	b.Release(ctx)
	c.Release(ctx)
	// Output:
	// third: true | fences differ: true
	// after a release: true
}
