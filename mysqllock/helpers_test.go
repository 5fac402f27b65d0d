package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

// db is the server that TestMain starts, with mysqllock's table, for the
// examples and the tests that do not stop, pause or restart the server;
// those start their own.
var db *testenv.MariaDB

// TestMain starts the examples' server. Without MariaDB the package's
// tests are skipped with a message, or fail when CI is set.
func TestMain(m *testing.M) {
	if testenv.ShortMain() { // the examples need a server
		os.Exit(m.Run())
	}
	if err := testenv.LookMariaDB(); err != nil {
		fmt.Fprintln(os.Stderr, "SKIP mysqllock tests:", err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	var err error
	if db, err = testenv.LaunchMariaDB(); err == nil {
		err = migrateDB(db.DSN())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mysqllock tests:", err)
		testenv.StopAll()
		os.Exit(1)
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "mysqllock tests: stopping servers:", err)
		code = 1
	}
	os.Exit(code)
}

// sharedDB returns the server TestMain started, and skips t under -short,
// when TestMain starts none.
func sharedDB(t testing.TB) *testenv.MariaDB {
	t.Helper()
	testenv.SkipIfShort(t, "needs MariaDB")
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

// openDB returns a pool of connections to dsn, closed when t ends.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	pool, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// newClient returns a Client on a pool of its own, closed when t ends
// (before the pool: cleanups run last-in first-out).
func newClient(t testing.TB, dsn string, opts ...mysqllock.ClientOption) *mysqllock.Client {
	t.Helper()
	c := mysqllock.New(openDB(t, dsn), opts...)
	t.Cleanup(func() { c.Close() })
	return c
}

// startDB starts a server for t and creates mysqllock's table in it.
func startDB(t testing.TB) *testenv.MariaDB {
	t.Helper()
	m := testenv.StartMariaDB(t)
	migrate(t, m.DSN())
	return m
}

// migrate creates the default table in the database at dsn.
func migrate(t testing.TB, dsn string) {
	t.Helper()
	if err := migrateDB(dsn); err != nil {
		t.Fatal(err)
	}
}

func migrateDB(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	c := mysqllock.New(pool)
	defer c.Close()
	return c.Migrate(ctx)
}

// admin runs one statement as root on the server, out of band, and
// returns the first column of each row as text.
func admin(t testing.TB, m *testenv.MariaDB, query string, args ...any) []string {
	t.Helper()
	pool := openDB(t, m.RootDSN())
	rows, err := pool.QueryContext(ctxFor(t, 10*time.Second), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if len(vals) > 0 {
			out = append(out, string(*vals[0].(*sql.RawBytes)))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}
