package fence_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(holderEnv); spec != "" {
		os.Exit(holderMain(spec))
	}
	if spec := os.Getenv(crashEnv); spec != "" {
		os.Exit(crashMain(spec))
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "fence tests: stopping servers:", err)
		code = 1
	}
	os.Exit(code)
}

// The servers the tests share, started by the first test that needs one
// and stopped by TestMain.
var (
	pgOnce sync.Once
	pgSrv  *testenv.Postgres
	pgErr  error
)

// sharedPostgres returns the shared PostgreSQL server, starting it if
// need be.
func sharedPostgres(t testing.TB) *testenv.Postgres {
	t.Helper()
	testenv.SkipIfShort(t, "needs PostgreSQL")
	if err := testenv.LookPostgres(); err != nil {
		if ci := os.Getenv("CI"); ci != "true" && ci != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	pgOnce.Do(func() { pgSrv, pgErr = testenv.LaunchPostgres() })
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	return pgSrv
}

// unique returns base with a random suffix, so that tests that share a
// server do not meet each other's tables and keys, even run with -count.
func unique(base string) string { return fmt.Sprintf("%s_%08x", base, rand.Uint32()) }

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// openDB opens driver's dsn and closes it when t ends.
func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return db
}

// sqliteDB opens a new SQLite database file in t's temporary directory,
// with a busy timeout so that its writers wait for each other.
func sqliteDB(t testing.TB) *sql.DB {
	path := filepath.Join(t.TempDir(), "fences.db")
	return openDB(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)")
}

func postgresDB(t testing.TB) *sql.DB {
	return openDB(t, "pgx", sharedPostgres(t).URL())
}

var (
	redisOnce sync.Once
	redisSrv  *testenv.Redis
	redisErr  error
)

// sharedRedis returns a Redis server shared by the tests that need no
// restart, that persists every write as a Redis guard needs, starting it
// if need be.
func sharedRedis(t testing.TB) *testenv.Redis {
	t.Helper()
	testenv.SkipIfShort(t, "needs redis-server")
	testenv.RequireBinary(t, "redis-server")
	redisOnce.Do(func() { redisSrv, redisErr = testenv.LaunchRedis(testenv.RedisConfig{Persistence: true}) })
	if redisErr != nil {
		t.Fatal(redisErr)
	}
	return redisSrv
}
