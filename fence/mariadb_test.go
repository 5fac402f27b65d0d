package fence_test

import (
	"database/sql"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
)

func init() {
	databases = append(databases, struct {
		name    string
		dialect fence.Dialect
		open    func(t testing.TB) *sql.DB
	}{"MariaDB", fence.MySQL, mariaDB})
}

var (
	mariaOnce sync.Once
	mariaSrv  *testenv.MariaDB
	mariaErr  error
)

// mariaDB opens the shared MariaDB server's test database, starting the
// server if need be.
func mariaDB(t testing.TB) *sql.DB {
	t.Helper()
	testenv.SkipIfShort(t, "needs MariaDB")
	if err := testenv.LookMariaDB(); err != nil {
		if ci := os.Getenv("CI"); ci != "true" && ci != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	mariaOnce.Do(func() { mariaSrv, mariaErr = testenv.LaunchMariaDB() })
	if mariaErr != nil {
		t.Fatal(mariaErr)
	}
	return openDB(t, "mysql", mariaSrv.DSN())
}

// A session that does not autocommit (autocommit=0, in the DSN as here or
// as the server's default) keeps a statement's write in a transaction that
// the statement does not end. Row.Update given the *sql.DB must still
// return nil only for a write that lands, and leave no row locked behind
// it on a pooled connection: a current holder's update, from another
// connection, then waits for nothing (a lock wait timeout of 3 s here, not
// the 50 s default).
func TestIntegrationSQLRowAutocommitOff(t *testing.T) {
	plain := mariaDB(t)
	ctx := ctxFor(t, time.Minute)
	noAutocommit := openDB(t, "mysql", mariaSrv.DSN()+"?autocommit=0")
	if ac := scalar(t, noAutocommit, "SELECT @@autocommit"); ac != 0 {
		t.Fatalf("@@autocommit is %d; want 0", ac)
	}
	other := openDB(t, "mysql", mariaSrv.DSN()+"?innodb_lock_wait_timeout=3")
	items := unique("items")
	execSQL(t, plain, "CREATE TABLE "+items+" (id varchar(10) PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)")
	execSQL(t, plain, "INSERT INTO "+items+" (id, qty, fence) VALUES ('x', 0, 5), ('y', 0, 30)")
	row := fence.Row{Dialect: fence.MySQL, Table: items}

	// A current holder's update lands.
	if err := row.Update(ctx, noAutocommit, "x", 20, "qty = ?", 2); err != nil {
		t.Fatalf("Row.Update with fence 20 after 5: %v", err)
	}
	if q, f := scalar(t, plain, "SELECT qty FROM "+items+" WHERE id = 'x'"), scalar(t, plain, "SELECT fence FROM "+items+" WHERE id = 'x'"); q != 2 || f != 20 {
		t.Errorf("Row.Update returned nil; another connection sees qty %d, fence %d, not 2 and 20: the write was not committed", q, f)
	}

	// A stale holder's is refused, and keeps nothing locked.
	if err := row.Update(ctx, noAutocommit, "y", 10, "qty = ?", 1); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Row.Update with fence 10 after 30: %v; want ErrStale", err)
	}
	start := time.Now()
	if err := row.Update(ctx, other, "y", 40, "qty = ?", 4); err != nil {
		t.Errorf("a current holder's Row.Update, from another connection, after the stale one (%v): %v", time.Since(start).Round(time.Millisecond), err)
	}
}

// Migrate, on a session that does not autocommit, leaves no transaction
// open on a pooled connection: such a transaction holds the table's
// metadata lock, so that the ALTER TABLE the README gives for a table
// made before (and any statement queued behind it) would wait for as long
// as the connection lives.
func TestIntegrationSQLMigrateAutocommitOff(t *testing.T) {
	mariaDB(t)
	ctx := ctxFor(t, time.Minute)
	noAutocommit := openDB(t, "mysql", mariaSrv.DSN()+"?autocommit=0")
	table := unique("fences")
	g := fence.NewSQL(fence.MySQL, fence.WithTable(table))
	for range 2 { // creates the table, then finds it
		if err := g.Migrate(ctx, noAutocommit); err != nil {
			t.Fatal(err)
		}
	}
	other := openDB(t, "mysql", mariaSrv.DSN()+"?lock_wait_timeout=3")
	start := time.Now()
	if _, err := other.ExecContext(ctx, "ALTER TABLE "+table+" MODIFY resource varbinary(255) NOT NULL"); err != nil {
		t.Errorf("ALTER TABLE after Migrate (%v): %v", time.Since(start).Round(time.Millisecond), err)
	}
}
