package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/mysqllock"
)

func Example() {
	ctx := context.Background()
	pool, err := sql.Open("mysql", db.DSN()) // "user:password@tcp(host:3306)/app"
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	locks := mysqllock.New(pool)
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

	// Work under the lease's context, which is cancelled if the lease is
	// lost, and hand the fence to the resource so it can refuse a stale
	// holder.
	work := lease.Context()
	fmt.Println("holding", lease.Key(), "with a fence:", lease.Fence() > 0, "and a live context:", work.Err() == nil)
	// Output: holding nightly-report with a fence: true and a live context: true
}

// Session mode: the lease also keeps a connection holding GET_LOCK, so
// that the holder learns soon if the database ends its session. A name is
// one lock in both modes.
func ExampleClient_NewSessionMutex() {
	ctx := context.Background()
	pool, _ := sql.Open("mysql", db.DSN())
	defer pool.Close()
	locks := mysqllock.New(pool)
	defer locks.Close()

	first, err := locks.NewSessionMutex("deploy").TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locks.NewMutex("deploy").TryLock(ctx)
	fmt.Println("lease mode while session mode holds it:", errors.Is(err, dlock.ErrNotObtained))
	first.Release(ctx)
	// Output: lease mode while session mode holds it: true
}
