package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pglock's WriteFenced and an SQL guard on pglock's fences table share
// their records and their rule, and their stale errors match both
// sentinels.
func TestIntegrationSharesPglockFences(t *testing.T) {
	pg := sharedPostgres(t)
	ctx := ctxFor(t, time.Minute)
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	table := unique("leases")
	locks := pglock.New(pool, pglock.WithTable(table))
	defer locks.Close()
	if err := locks.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := postgresDB(t)
	guard := fence.NewSQL(fence.Postgres, fence.WithTable(table+"_fences"))
	noop := func(context.Context, pgx.Tx) error { return nil }
	sqlNoop := func(context.Context, *sql.Tx) error { return nil }

	if err := locks.WriteFenced(ctx, "r", 10, noop); err != nil {
		t.Fatal(err)
	}
	if err := guard.WriteFenced(ctx, db, "r", 9, sqlNoop); !errors.Is(err, fence.ErrStale) || !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("the guard with fence 9 after pglock's 10: %v; want stale", err)
	}
	if err := guard.WriteFenced(ctx, db, "r", 11, sqlNoop); err != nil {
		t.Fatal(err)
	}
	err = locks.WriteFenced(ctx, "r", 10, noop)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Newest != 11 || !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("pglock with fence 10 after the guard's 11: %v; want a StaleError with Newest 11", err)
	}
}
