// go get github.com/dlock-go/dlock github.com/jackc/pgx/v5
// DLOCK_POSTGRES=postgres://app@db:5432/app go run .   (default: postgres://postgres@127.0.0.1:5432/postgres)
package main

import (
	"cmp"
	"context"
	"errors"
	"log"
	"os"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("DLOCK_POSTGRES"), "postgres://postgres@127.0.0.1:5432/postgres"))
	if err != nil {
		log.Fatal(err) // a URL that does not parse; pgxpool connects at first use
	}
	defer pool.Close()
	locks := pglock.New(pool) // one per database; closed (deferred) before the pool
	defer locks.Close()
	if err := locks.Migrate(ctx); err != nil { // or run pglock.SchemaSQL("") with your migrations
		log.Fatal(err)
	}

	m := locks.NewMutex("nightly-report") // lease mode: a row with an expiry
	// m := locks.NewSessionMutex("nightly-report") // session mode: also an advisory lock on a kept connection
	lease, err := m.TryLock(ctx) // Lock(ctx) waits until ctx ends
	if errors.Is(err, dlock.ErrNotObtained) {
		log.Print("another process holds nightly-report")
		return
	}
	if err != nil {
		log.Fatal(err) // the database cannot be reached, or refused
	}
	defer lease.Release(context.Background())

	// Work under the lock, as in the quick start: stop when lease.Context() ends. When the data
	// is in this database, write it with locks.WriteFenced (see docs/fencing.md).
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence goes with every write it makes.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
