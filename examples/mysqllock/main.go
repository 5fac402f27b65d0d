// go get github.com/dlock-go/dlock github.com/go-sql-driver/mysql
// DLOCK_MYSQL='app:secret@tcp(db:3306)/app' go run .   (default: root@tcp(127.0.0.1:3306)/test)
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log"
	"os"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql" // the "mysql" driver, for MySQL and MariaDB
)

func main() {
	ctx := context.Background()
	db, err := sql.Open("mysql", cmp.Or(os.Getenv("DLOCK_MYSQL"), "root@tcp(127.0.0.1:3306)/test"))
	if err != nil {
		log.Fatal(err) // a DSN that does not parse; database/sql connects at first use
	}
	defer db.Close()
	locks := mysqllock.New(db) // one per database; closed (deferred) before the *sql.DB
	defer locks.Close()
	if err := locks.Migrate(ctx); err != nil { // or run mysqllock.SchemaSQL("") with your migrations
		log.Fatal(err)
	}

	m := locks.NewMutex("nightly-report") // lease mode: a row with an expiry
	// m := locks.NewSessionMutex("nightly-report") // session mode: also GET_LOCK on a kept connection
	lease, err := m.TryLock(ctx) // Lock(ctx) waits until ctx ends
	if errors.Is(err, dlock.ErrNotObtained) {
		log.Print("another process holds nightly-report")
		return
	}
	if err != nil {
		log.Fatal(err) // the database cannot be reached, or refused
	}
	defer lease.Release(context.Background())

	// Work under the lock, as in the quick start: stop when lease.Context() ends. Check the fence
	// in the writer's transaction with package fence (see docs/fencing.md).
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence goes with every write it makes.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
