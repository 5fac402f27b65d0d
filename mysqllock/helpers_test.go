package mysqllock_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

// db is the server that TestMain starts, with mysqllock's table, for the
// examples and the tests that do not stop, pause or restart the server;
// those start their own.
var db *testenv.MariaDB

// TestMain starts the examples' server (see dbleasetest.Main).
func TestMain(m *testing.M) {
	dbleasetest.Main(m, "mysqllock", testenv.LookMariaDB, func() (err error) {
		if db, err = testenv.LaunchMariaDB(); err == nil {
			err = migrateDB(db.DSN())
		}
		return err
	})
}

// sharedDB returns the server TestMain started, and skips t under -short,
// when TestMain starts none.
func sharedDB(t testing.TB) *testenv.MariaDB {
	t.Helper()
	testenv.SkipIfShort(t, "needs MariaDB")
	return db
}

var (
	unique = dbleasetest.Unique
	ctxFor = dbleasetest.Ctx
)

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

// shared returns m as the checks of dbleasetest reach it, its Clients
// connecting with dsn (m.DSN(), or one with other parameters).
func shared(m *testenv.MariaDB, dsn string) dbleasetest.DB {
	return dbleasetest.DB{
		Addr: m.Addr(), Modes: modeNames, ErrClosed: mysqllock.ErrClosed,
		Client: func(t testing.TB, addr string) dbleasetest.Client {
			c := newClient(t, strings.Replace(dsn, m.Addr(), addr, 1))
			return dbleasetest.Client{
				Locker: func(mode int, name string, ttl time.Duration) dlock.Locker {
					return modes[mode].newLocker(c, name, withTTL(ttl)...)
				},
				Election: func(name string, ttl time.Duration) dlock.Election { return c.NewElection(name, withTTL(ttl)...) },
				Close:    c.Close,
			}
		},
		LockRow: func(t testing.TB, ctx context.Context, name string) func() error {
			tx, err := openDB(t, m.RootDSN()).BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback() })
			if _, err := tx.ExecContext(ctx, "SELECT token FROM dlock_leases WHERE name = ? FOR UPDATE", name); err != nil {
				t.Fatal(err)
			}
			return tx.Commit
		},
		Kill: m.Kill, Restart: m.Restart,
		WrapAttempts: mysqllock.WrapAttempts,
	}
}

// modeNames are the names of modes, in their order.
var modeNames = []string{leaseMode.name, sessionMode.name}

// withTTL is WithTTL(ttl), or no option if ttl is 0.
func withTTL(ttl time.Duration) []mysqllock.Option {
	if ttl == 0 {
		return nil
	}
	return []mysqllock.Option{mysqllock.WithTTL(ttl)}
}
