package mysqllock_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// An account with no grant at all (USAGE only) can take a session-mode
// lock's GET_LOCK lock (GET_LOCK needs no privilege, its names are the
// server's, and the name is derived from the table and the lock's name
// alone), and so keep every SessionMutex of that name from the lock for
// as long as it likes. A lease-mode Mutex is the table's row, which such
// an account cannot touch. The package doc says so.
func TestIntegrationSessionModeStranger(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	user := unique("stranger")
	admin(t, srv, "CREATE USER '"+user+"'@'%' IDENTIFIED BY 'pw'")
	t.Cleanup(func() { admin(t, srv, "DROP USER '"+user+"'@'%'") })
	dsn := user + ":pw@tcp(" + srv.Addr() + ")/"
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := newClient(t, srv.DSN())
	name := unique("shared")
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", c.NewSessionMutex(name).LockName()).Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("the stranger's GET_LOCK: %v, %v", got, err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT 1 FROM dlock.dlock_leases"); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("the stranger reading the table: %v; want access denied", err)
	}
	if l, err := c.NewSessionMutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		if err == nil {
			l.Release(ctx)
		}
		t.Errorf("session-mode TryLock while a stranger holds its GET_LOCK lock: %v; want ErrNotObtained", err)
	}
	l, err := c.NewMutex(name + "-lease").TryLock(ctx)
	if err != nil {
		t.Fatalf("lease-mode TryLock: %v", err)
	}
	l.Release(ctx)
}
