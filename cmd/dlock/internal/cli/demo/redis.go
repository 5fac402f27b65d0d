package demo

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/fence"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// workTime is how long a worker holds the lock each round: the work the
// lock protects.
const workTime = 20 * time.Millisecond

// launchRedis starts a redis-server without persistence.
func launchRedis() (*servers.Redis, error) {
	srv, err := servers.LaunchRedis(servers.RedisConfig{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	return srv, nil
}

// redisClient returns a go-redis client of its own for addr.
func redisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// newLocks returns a lock client on its own connection to addr, and a
// function that closes both.
func newLocks(addr string) (*redislock.Client, func()) {
	rdb := redisClient(addr)
	c := redislock.New(goredisconn.New(rdb))
	return c, func() { c.Close(); rdb.Close() }
}

// redisPart runs parts 1 and 2 on one private redis-server.
func (d *demo) redisPart(ctx context.Context) error {
	d.heading("1. One Redis: workers contend for redislock.Mutex")
	srv, err := launchRedis()
	if err != nil {
		return err
	}
	defer srv.Close()
	d.out.printf("Started redis-server on %s (pid %d, no persistence).\n", srv.Addr(), srv.PID())
	d.out.printf("%d workers, each with its own connection, take the lock %q %d times each and hold it %v.\n\n",
		d.o.Workers, "nightly-report", d.o.Rounds, workTime)
	d.out.printf("%-7s %-6s %-17s %-10s %s\n", "worker", "round", "fence", "waited", "hand-over (previous release to this grant)")

	d.redis = newBoard(func(g grant) {
		hand := "-"
		if g.handover >= 0 {
			hand = ms(g.handover)
		}
		d.out.printf("%-7d %-6d %-17d %-10s %s\n", g.worker, g.round, g.lease.Fence(), ms(g.waited), hand)
	})
	var wg sync.WaitGroup
	for w := 1; w <= d.o.Workers; w++ {
		locks, closeLocks := newLocks(srv.Addr())
		defer closeLocks()
		m := locks.NewMutex("nightly-report", redislock.WithTTL(5*time.Second))
		wg.Go(func() { d.redis.contend(ctx, w, m, d.o.Rounds, holdFor(workTime)) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.redis.err(); err != nil {
		return err
	}
	s := d.redis.stats(0)
	d.out.printf("\n%d grants. %s\n", s.grants, d.redis.verdict())
	d.out.printf("Hand-over: median %s, longest %s; waiters are woken by the release (pub/sub), not by polling.\n",
		ms(s.medHandover), ms(s.maxHandover))
	d.out.printf("(redislock.Mutex is not fair: the fastest waiter wins. FairMutex and zklock.Mutex serve in order.)\n")

	return d.staleHolder(ctx, srv.Addr())
}

// verdict says in one line whether the board saw the lock keep its
// promises.
func (b *board) verdict() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.violations); n > 0 {
		return fmt.Sprintf("VIOLATIONS: %d (see the summary)", n)
	}
	if len(b.grants) < 2 {
		return "At most one holder at any time; only one fence, so nothing to compare."
	}
	return "At most one holder at any time, and every fence larger than the one before: exclusivity checked in-process, fences strictly increasing."
}

// fencedStore is the protected resource: it accepts a write only with a
// fence at least as high as any it has accepted, through package fence's
// in-memory Store (the one fence.Handler keeps for an HTTP service).
type fencedStore struct{ fence.Store }

func (s fencedStore) write(f uint64) error {
	var stale *fence.StaleError
	err := s.Advance(context.Background(), "ledger", f)
	if errors.As(err, &stale) {
		return fmt.Errorf("refused: fence %d is older than %d (fence.ErrStale)", f, stale.Newest)
	}
	return err
}

func result(err error) string {
	if err != nil {
		return err.Error()
	}
	return "accepted"
}

// staleHolder shows a holder paused past its lease being told on Done, and
// a fenced resource refusing it.
func (d *demo) staleHolder(ctx context.Context, addr string) error {
	d.heading("2. A holder that stalls past its lease is told, and fenced out")
	slowLocks, closeSlow := newLocks(addr)
	defer closeSlow()
	fastLocks, closeFast := newLocks(addr)
	defer closeFast()
	store := fencedStore{fence.NewMemory()}

	const ttl = 300 * time.Millisecond
	start := time.Now()
	slow, err := slowLocks.NewMutex("ledger", redislock.WithTTL(ttl), redislock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		return err
	}
	d.out.printf("%s  A takes %q with fence %d and a fixed %v lease (no renewal), then stalls (a GC pause, say).\n",
		since(start, time.Now()), "ledger", slow.Fence(), ttl)
	select {
	case <-slow.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	why := "lost"
	if errors.Is(slow.Err(), dlock.ErrExpired) {
		why = "expired"
	}
	d.out.printf("%s  A's Done() closes: its lease %s (Err() matches dlock.ErrLost). A that watches it stops here.\n", since(start, time.Now()), why)
	fast, err := fastLocks.NewMutex("ledger").Lock(ctx)
	if err != nil {
		return err
	}
	fastWrite := store.write(fast.Fence())
	d.out.printf("%s  B takes %q with fence %d and writes: %s\n", since(start, time.Now()), "ledger", fast.Fence(), result(fastWrite))
	slowWrite := store.write(slow.Fence())
	d.out.printf("%s  A wakes up and writes anyway with fence %d: %s\n", since(start, time.Now()), slow.Fence(), result(slowWrite))
	if err := fast.Release(ctx); err != nil {
		return err
	}
	relErr := slow.Release(ctx)
	if !errors.Is(relErr, dlock.ErrNotHeld) {
		return fmt.Errorf("stale release: got %v, want an error matching dlock.ErrNotHeld", relErr)
	}
	d.out.printf("%s  A's Release fails with dlock.ErrNotHeld: A's lease had expired, and B holds the lock.\n", since(start, time.Now()))
	d.staleRefused = fastWrite == nil && slowWrite != nil
	d.out.printf("A lease can be lost at any moment. Done() tells the holder; the fence lets the resource\n")
	d.out.printf("refuse a holder that could not stop in time.\n")
	return nil
}
