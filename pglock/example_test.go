package pglock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, db.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	locks := pglock.New(pool)
	defer locks.Close() // before pool.Close
	if err := locks.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}

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

// Session mode: the lease also keeps a connection, whose session holds an
// advisory lock, so that the holder learns at once if the database ends
// it. A name is one lock in both modes.
func ExampleClient_NewSessionMutex() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, db.URL())
	defer pool.Close()
	locks := pglock.New(pool)
	defer locks.Close()

	first, err := locks.NewSessionMutex("deploy").TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locks.NewSessionMutex("deploy").TryLock(ctx)
	fmt.Println(err)
	first.Release(ctx)
	// Output: dlock: lock not obtained
}

// The fence check and the write it guards commit together: a holder whose
// lease was superseded cannot write, even if it has not noticed yet.
func ExampleClient_WriteFenced() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, db.URL())
	defer pool.Close()
	locks := pglock.New(pool)
	defer locks.Close()
	pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS stock (item text PRIMARY KEY, count int NOT NULL)")
	pool.Exec(ctx, "INSERT INTO stock VALUES ('widget', 10) ON CONFLICT DO NOTHING")

	restock := func(fence uint64, count int) error {
		return locks.WriteFenced(ctx, "stock/widget", fence, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE stock SET count = $1 WHERE item = 'widget'", count)
			return err
		})
	}
	lease, err := locks.NewMutex("stock/widget").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("current holder:", restock(lease.Fence(), 20))
	lease.Release(ctx)

	// A holder that was paused past its lease comes back with its old
	// fence after the next holder has written.
	next, _ := locks.NewMutex("stock/widget").Lock(ctx)
	restock(next.Fence(), 30)
	next.Release(ctx)
	err = restock(lease.Fence(), 25)
	fmt.Println("stale holder refused:", errors.Is(err, pglock.ErrStaleFence))

	var count int
	pool.QueryRow(ctx, "SELECT count FROM stock WHERE item = 'widget'").Scan(&count)
	fmt.Println("count:", count)
	// Output:
	// current holder: <nil>
	// stale holder refused: true
	// count: 30
}

// The SQL that Migrate runs, for those who run their migrations
// themselves.
func ExampleSchemaSQL() {
	sql, err := pglock.SchemaSQL("")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sql)
	// Output:
	// -- One row per lock name, for both modes. A release frees the row
	// -- (token '', expires_at -infinity) rather than deleting it.
	// CREATE TABLE IF NOT EXISTS "dlock_leases" (
	//     name       text        PRIMARY KEY,
	//     token      text        NOT NULL, -- the holder's owner token; '' when free
	//     fence      bigint      NOT NULL, -- the fence of the latest grant
	//     expires_at timestamptz NOT NULL  -- on the database's clock
	// );
	//
	// -- The record of an election's leader (Client.NewElection): its term, token
	// -- and value, valid while the token holds the row. Added after the table's
	// -- first version: Migrate again to use elections. Only when it is missing:
	// -- ALTER TABLE locks the table against every lock call, even to do nothing.
	// DO $$
	// BEGIN
	//     IF NOT EXISTS (SELECT FROM pg_attribute
	//                    WHERE attrelid = '"dlock_leases"'::regclass AND attname = 'leader' AND NOT attisdropped) THEN
	//         ALTER TABLE "dlock_leases" ADD COLUMN leader text;
	//     END IF;
	// END
	// $$;
	//
	// -- A grant's fence is at least the next value of this sequence, the
	// -- row's last fence plus one and the database's clock in microseconds
	// -- (acquire.sql).
	// CREATE SEQUENCE IF NOT EXISTS "dlock_leases_fence_seq" AS bigint;
	//
	// -- Move the sequence up to the database's clock in microseconds. Fences
	// -- do not depend on it: each grant lifts its fence to the clock itself.
	// SELECT setval(s.tableoid, c.us)
	// FROM "dlock_leases_fence_seq" s,
	//      (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) c
	// WHERE s.last_value < c.us - 1000000;
	//
	// -- WriteFenced: the newest fence written to each resource.
	// CREATE TABLE IF NOT EXISTS "dlock_leases_fences" (
	//     resource text   PRIMARY KEY,
	//     fence    bigint NOT NULL
	// );
}
