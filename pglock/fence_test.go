package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// setBalance returns a write that sets the balance of the account id in
// the table accounts.
func setBalance(accounts, id string, v int) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE "+accounts+" SET balance = $2 WHERE id = $1", id, v)
		return err
	}
}

// The fenced write commits with the newest fence (again, too), and refuses
// an older one inside the same transaction: nothing the stale writer did
// in it is kept.
func TestIntegrationFencedWrite(t *testing.T) {
	accounts, resource := unique("accounts"), unique("account/a")
	admin(t, sharedDB(t).URL(), "CREATE TABLE "+accounts+" (id text PRIMARY KEY, balance int NOT NULL)")
	admin(t, sharedDB(t).URL(), "INSERT INTO "+accounts+" VALUES ('a', 0)")
	pool := newPool(t, sharedDB(t).URL())
	c := pglock.New(pool)
	defer c.Close()
	ctx := ctxFor(t, time.Minute)
	balance := func() string {
		return admin(t, sharedDB(t).URL(), "SELECT balance FROM "+accounts+" WHERE id = 'a'")[0]
	}
	set := func(v int) func(context.Context, pgx.Tx) error { return setBalance(accounts, "a", v) }
	fenced := func(fence uint64, v int) error { return c.WriteFenced(ctx, resource, fence, set(v)) }

	for _, step := range []struct {
		fence uint64
		v     int
		stale bool
	}{{10, 1, false}, {10, 2, false}, {11, 3, false}, {10, 4, true}, {9, 5, true}} {
		err := fenced(step.fence, step.v)
		if step.stale != errors.Is(err, pglock.ErrStaleFence) || !step.stale && err != nil {
			t.Fatalf("write of %d with fence %d: %v; want stale: %v", step.v, step.fence, err, step.stale)
		}
	}
	if got := balance(); got != "3" {
		t.Fatalf("balance %s; want 3, the last write with a current fence", got)
	}

	// The caller's own transaction: a write made before the check is
	// rolled back with it.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := set(99)(ctx, tx); err != nil {
		t.Fatal(err)
	}
	err = c.CheckFence(ctx, tx, resource, 10)
	if !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("CheckFence with fence 10 after 11: %v; want ErrStaleFence", err)
	}
	t.Logf("stale: %v", err)
	tx.Rollback(ctx)
	if got := balance(); got != "3" {
		t.Fatalf("balance %s after a stale transaction; want 3", got)
	}

	// A write with a newer fence waits for a transaction that recorded an
	// older one, which commits first; after that, the older one is stale.
	older, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	if err := c.CheckFence(ctx, older, resource, 12); err != nil {
		t.Fatal(err)
	}
	newer := make(chan error, 1)
	go func() { newer <- fenced(13, 13) }()
	select {
	case err := <-newer:
		t.Fatalf("the write with fence 13 did not wait for the open transaction with fence 12: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := set(12)(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-newer; err != nil {
		t.Fatal(err)
	}
	if err := fenced(12, 120); !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("fence 12 after 13: %v; want ErrStaleFence", err)
	}
	if got := balance(); got != "13" {
		t.Fatalf("balance %s; want 13", got)
	}

	// The write's own error comes back as it is, and nothing is kept.
	boom := errors.New("boom")
	err = c.WriteFenced(ctx, resource, 14, func(ctx context.Context, tx pgx.Tx) error {
		if err := set(14)(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if err != boom || balance() != "13" {
		t.Fatalf("a write that failed: %v, balance %s; want boom and 13", err, balance())
	}
}

// Clients in many sessions take turns under the lock: a read-modify-write
// of a row in separate statements loses no update, and every write,
// fenced with the holder's lease, is accepted.
func TestIntegrationMutualExclusionInDatabase(t *testing.T) {
	counters := unique("counters")
	admin(t, sharedDB(t).URL(), "CREATE TABLE "+counters+" (id text PRIMARY KEY, n int NOT NULL)")
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			admin(t, sharedDB(t).URL(), "INSERT INTO "+counters+" VALUES ($1, 0)", m.name)
			name := unique("counter")
			const clients, rounds = 16, 8
			ctx := ctxFor(t, 2*time.Minute)
			var inside atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, clients*rounds)
			for i := range clients {
				pool := newPool(t, sharedDB(t).URL())
				c := pglock.New(pool)
				t.Cleanup(func() { c.Close() })
				l := m.newLocker(c, name)
				wg.Go(func() {
					for range rounds {
						if err := increment(ctx, pool, c, l, counters, m.name, &inside); err != nil {
							errs <- fmt.Errorf("client %d: %w", i, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if got := admin(t, sharedDB(t).URL(), "SELECT n FROM "+counters+" WHERE id = $1", m.name)[0]; got != fmt.Sprint(clients*rounds) {
				t.Errorf("counter %s; want %d", got, clients*rounds)
			}
		})
	}
}

// increment adds one to the counter id in the table counters under the
// lock l: a read, then a fenced write of the value read plus one.
func increment(ctx context.Context, pool *pgxpool.Pool, c *pglock.Client, l dlock.Locker, counters, id string, inside *atomic.Int32) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Release(ctx)
	if n := inside.Add(1); n != 1 {
		return fmt.Errorf("%d holders at once", n)
	}
	defer inside.Add(-1)
	var n int
	if err := pool.QueryRow(ctx, "SELECT n FROM "+counters+" WHERE id = $1", id).Scan(&n); err != nil {
		return err
	}
	return c.WriteFenced(ctx, counters+"/"+id, lease.Fence(), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE "+counters+" SET n = $2 WHERE id = $1", id, n+1)
		return err
	})
}
