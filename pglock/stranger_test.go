package pglock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// An account that may connect to the database, with no grant at all, can
// take a session-mode lock's advisory lock (advisory locks need no
// privilege, and the key is derived from the table and the name alone),
// and so keep every SessionMutex of that name from the lock for as long
// as it likes. A lease-mode Mutex of the same name is the table's row,
// which such an account cannot touch. The package doc says so.
func TestIntegrationSessionModeStranger(t *testing.T) {
	url := sharedDB(t).URL()
	ctx := ctxFor(t, time.Minute)
	role := unique("stranger")
	admin(t, url, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { admin(t, url, "DROP ROLE "+role) })
	conn, err := pgx.Connect(ctx, strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	c := newClient(t, url)
	name := unique("shared")
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", c.NewSessionMutex(name).AdvisoryKey()).Scan(&got); err != nil || !got {
		t.Fatalf("the stranger's pg_try_advisory_lock: %v, %v", got, err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1 FROM "+pglock.DefaultTable); err == nil {
		t.Fatalf("the stranger can read %s; want no grants", pglock.DefaultTable)
	}
	if l, err := c.NewSessionMutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		if err == nil {
			l.Release(ctx)
		}
		t.Errorf("session-mode TryLock while a stranger holds its advisory lock: %v; want ErrNotObtained", err)
	}
	l, err := c.NewMutex(name + "-lease").TryLock(ctx)
	if err != nil {
		t.Fatalf("lease-mode TryLock: %v", err)
	}
	l.Release(ctx)
}
