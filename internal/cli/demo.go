package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

type demoOptions struct {
	workers, rounds int
}

func parseDemo(args []string, stderr io.Writer) (demoOptions, error) {
	o := demoOptions{}
	fs := flag.NewFlagSet("dlock demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.workers, "workers", 4, "number of contending workers, each with its own Redis connection (1-64)")
	fs.IntVar(&o.rounds, "rounds", 3, "times each worker takes the lock (1-100)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("dlock demo takes no arguments, got %q", fs.Args())
	case o.workers < 1 || o.workers > 64:
		return o, fmt.Errorf("-workers %d is out of range: use 1 to 64", o.workers)
	case o.rounds < 1 || o.rounds > 100:
		return o, fmt.Errorf("-rounds %d is out of range: use 1 to 100", o.rounds)
	}
	return o, nil
}

// runDemo starts a private redis-server, lets workers contend for one lock,
// and shows a fenced resource refusing a holder whose lease ran out.
func runDemo(args []string, stdout, stderr io.Writer) int {
	o, err := parseDemo(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "dlock demo:", err)
		}
		return cmdutil.ExitUsage
	}
	if _, err := testenv.LookBinary("redis-server"); err != nil {
		fmt.Fprintln(stderr, "dlock demo:", err)
		return cmdutil.ExitError
	}
	srv, err := testenv.LaunchRedis(testenv.RedisConfig{})
	if err != nil {
		fmt.Fprintln(stderr, "dlock demo:", err)
		return cmdutil.ExitError
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "Started redis-server on %s (no persistence).\n\n", srv.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := contend(ctx, srv.Addr(), o, stdout); err != nil {
		fmt.Fprintln(stderr, "dlock demo:", err)
		return cmdutil.ExitError
	}
	if err := staleHolder(ctx, srv.Addr(), stdout); err != nil {
		fmt.Fprintln(stderr, "dlock demo:", err)
		return cmdutil.ExitError
	}
	return cmdutil.ExitOK
}

// newLocks returns a lock client on its own connection and a function that
// closes both.
func newLocks(addr string) (*redislock.Client, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := redislock.New(goredisconn.New(rdb))
	return c, func() { c.Close(); rdb.Close() }
}

func contend(ctx context.Context, addr string, o demoOptions, out io.Writer) error {
	fmt.Fprintf(out, "%d workers, each with its own connection, take the lock %q %d times each.\n", o.workers, "nightly-report", o.rounds)
	fmt.Fprintf(out, "%-8s %-8s %-18s %s\n", "worker", "round", "fence", "waited")
	var (
		mu       sync.Mutex
		inside   int
		last     uint64
		failures []error
		wg       sync.WaitGroup
	)
	for w := 1; w <= o.workers; w++ {
		locks, closeLocks := newLocks(addr)
		defer closeLocks()
		m := locks.NewMutex("nightly-report", redislock.WithTTL(5*time.Second))
		wg.Go(func() {
			for round := 1; round <= o.rounds; round++ {
				start := time.Now()
				lease, err := m.Lock(ctx)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("worker %d: %w", w, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				inside++
				if inside != 1 || lease.Fence() <= last {
					failures = append(failures, fmt.Errorf("worker %d: exclusion broken (inside=%d, fence %d after %d)", w, inside, lease.Fence(), last))
				}
				last = lease.Fence()
				fmt.Fprintf(out, "%-8d %-8d %-18d %v\n", w, round, lease.Fence(), time.Since(start).Round(time.Microsecond))
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // the work the lock protects
				mu.Lock()
				inside--
				mu.Unlock()
				if err := lease.Release(ctx); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("worker %d: release: %w", w, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(failures...); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nEvery hold was exclusive and every fence larger than the one before.\n\n")
	return nil
}

// fencedStore accepts a write only with a fence at least as high as any it
// has accepted: the check a protected resource makes.
type fencedStore struct {
	mu      sync.Mutex
	highest uint64
}

func (s *fencedStore) write(fence uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.highest {
		return fmt.Errorf("refused: fence %d is older than %d", fence, s.highest)
	}
	s.highest = fence
	return nil
}

func staleHolder(ctx context.Context, addr string, out io.Writer) error {
	fmt.Fprintln(out, "A holder that stalls past its lease (a GC pause, say) is told, and fenced out:")
	slowLocks, closeSlow := newLocks(addr)
	defer closeSlow()
	fastLocks, closeFast := newLocks(addr)
	defer closeFast()
	store := &fencedStore{}

	ttl := 300 * time.Millisecond
	slow, err := slowLocks.NewMutex("ledger", redislock.WithTTL(ttl), redislock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  A holds %q with fence %d and a fixed %v lease, then stalls.\n", "ledger", slow.Fence(), ttl)
	<-slow.Done()
	fmt.Fprintf(out, "  A's Done() closed: %v\n", slow.Err())
	fast, err := fastLocks.NewMutex("ledger").Lock(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  B takes %q with fence %d and writes: %v\n", "ledger", fast.Fence(), result(store.write(fast.Fence())))
	fmt.Fprintf(out, "  A wakes up and writes anyway:       %v\n", result(store.write(slow.Fence())))
	if err := fast.Release(ctx); err != nil {
		return err
	}
	err = slow.Release(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) {
		return fmt.Errorf("stale release: got %v, want ErrNotHeld", err)
	}
	fmt.Fprintf(out, "  A's Release reports: %v\n", err)
	return nil
}

func result(err error) string {
	if err != nil {
		return err.Error()
	}
	return "accepted"
}
