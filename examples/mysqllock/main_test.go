package main

import (
	"context"
	"testing"
	"time"

	"database/sql"

	"github.com/dlock-go/dlock/internal/exampletest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// The MySQL example runs against a real MariaDB named by DLOCK_MYSQL: it
// creates mysqllock's table, takes the lock, works and releases it; run
// while another client holds the lock, it says so and returns.
func TestIntegrationMysqllockExample(t *testing.T) {
	srv := testenv.StartMariaDB(t)
	t.Setenv("DLOCK_MYSQL", srv.DSN())
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

	db, err := sql.Open("mysql", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	locks := mysqllock.New(db)
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := locks.NewMutex("nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "another process holds nightly-report")
}
