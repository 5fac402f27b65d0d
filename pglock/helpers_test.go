package pglock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the cluster that TestMain starts, with pglock's objects, for the
// examples and the tests that do not stop, pause or restart the server;
// those start their own.
var db *testenv.Postgres

// TestMain starts the examples' cluster. Without PostgreSQL the package's
// tests are skipped with a message, or fail when CI is set.
func TestMain(m *testing.M) {
	if testenv.ShortMain() { // the examples need a server
		os.Exit(m.Run())
	}
	if err := testenv.LookPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "SKIP pglock tests:", err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	var err error
	if db, err = testenv.LaunchPostgres(); err == nil {
		err = migrateDB(db.URL())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pglock tests:", err)
		testenv.StopAll()
		os.Exit(1)
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "pglock tests: stopping servers:", err)
		code = 1
	}
	os.Exit(code)
}

// sharedDB returns the cluster TestMain started, and skips t under
// -short, when TestMain starts none.
func sharedDB(t testing.TB) *testenv.Postgres {
	t.Helper()
	testenv.SkipIfShort(t, "needs PostgreSQL")
	return db
}

// unique returns base with a random suffix: the tests that share db must
// not meet each other's tables, rows and locks, even run again with
// -count.
func unique(base string) string { return fmt.Sprintf("%s_%08x", base, rand.Uint32()) }

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

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
