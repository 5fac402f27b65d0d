package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/exampletest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL example runs against a real server named by
// DLOCK_POSTGRES: it creates pglock's table, takes the lock, works and
// releases it; run while another client holds the lock, it says so and
// returns.
func TestIntegrationPglockExample(t *testing.T) {
	srv := testenv.StartPostgres(t)
	t.Setenv("DLOCK_POSTGRES", srv.URL())
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	locks := pglock.New(pool)
	defer locks.Close()
	held, err := locks.NewMutex("nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "another process holds nightly-report")
}
