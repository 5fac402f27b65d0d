package pglock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the cluster that TestMain starts, with pglock's objects, for the
// examples and the tests that do not stop, pause or restart the server;
// those start their own.
var db *testenv.Postgres

// TestMain starts the examples' cluster (see dbleasetest.Main).
func TestMain(m *testing.M) {
	dbleasetest.Main(m, "pglock", testenv.LookPostgres, func() (err error) {
		if db, err = testenv.LaunchPostgres(); err == nil {
			err = migrateDB(db.URL())
		}
		return err
	})
}

// sharedDB returns the cluster TestMain started, and skips t under
// -short, when TestMain starts none.
func sharedDB(t testing.TB) *testenv.Postgres {
	t.Helper()
	testenv.SkipIfShort(t, "needs PostgreSQL")
	return db
}

var (
	unique = dbleasetest.Unique
	ctxFor = dbleasetest.Ctx
)

// newPool returns a pool of connections to url, closed when t ends.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newClient returns a Client on a pool of its own, closed when t ends
// (before the pool: cleanups run last-in first-out).
func newClient(t testing.TB, url string, opts ...pglock.ClientOption) *pglock.Client {
	t.Helper()
	c := pglock.New(newPool(t, url), opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// startDB starts a cluster for t and creates pglock's objects in it.
func startDB(t testing.TB) *testenv.Postgres {
	t.Helper()
	pg := testenv.StartPostgres(t)
	migrate(t, pg.URL())
	return pg
}

// migrate creates the default table's objects in the database at url.
func migrate(t testing.TB, url string) {
	t.Helper()
	if err := migrateDB(url); err != nil {
		t.Fatal(err)
	}
}

func migrateDB(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	c := pglock.New(pool)
	defer c.Close()
	return c.Migrate(ctx)
}

// admin runs one statement on the database at url, out of band, and
// returns the first column of each row as text.
func admin(t testing.TB, url, sql string, args ...any) []string {
	t.Helper()
	pool := newPool(t, url)
	rows, err := pool.Query(ctxFor(t, 10*time.Second), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if len(vals) > 0 {
			out = append(out, fmt.Sprint(vals[0]))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// shared returns pg as the checks of dbleasetest reach it.
func shared(pg *testenv.Postgres) dbleasetest.DB { return sharedWith(pg, "") }

// sharedWith is shared, with params added to the URL of its Clients.
func sharedWith(pg *testenv.Postgres, params string) dbleasetest.DB {
	return dbleasetest.DB{
		Addr: pg.Addr(), Modes: modeNames, ErrClosed: pglock.ErrClosed,
		Client: func(t testing.TB, addr string) dbleasetest.Client {
			c := newClient(t, via(pg, addr, unique("dbleasetest"))+params)
			return dbleasetest.Client{
				Locker: func(mode int, name string, ttl time.Duration) dlock.Locker {
					return modes[mode].newLocker(c, name, withTTL(ttl)...)
				},
				Election: func(name string, ttl time.Duration) dlock.Election { return c.NewElection(name, withTTL(ttl)...) },
				Close:    c.Close,
			}
		},
		LockRow: func(t testing.TB, ctx context.Context, name string) func() error {
			tx, err := newPool(t, pg.URL()).Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback(context.Background()) })
			if _, err := tx.Exec(ctx, "SELECT FROM dlock_leases WHERE name = $1 FOR UPDATE", name); err != nil {
				t.Fatal(err)
			}
			return func() error { return tx.Commit(ctx) }
		},
		Kill: pg.Kill, Restart: pg.Restart,
		WrapAttempts: pglock.WrapAttempts,
	}
}

// modeNames are the names of modes, in their order.
var modeNames = []string{leaseMode.name, sessionMode.name}

// withTTL is WithTTL(ttl), or no option if ttl is 0.
func withTTL(ttl time.Duration) []pglock.Option {
	if ttl == 0 {
		return nil
	}
	return []pglock.Option{pglock.WithTTL(ttl)}
}
