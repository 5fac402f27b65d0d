package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// Without Migrate, every call says to call it.
func TestIntegrationUnmigrated(t *testing.T) {
	c := newClient(t, sharedDB(t).URL(), pglock.WithTable("never_migrated"))
	ctx := ctxFor(t, 10*time.Second)
	for _, m := range modes {
		_, err := m.newLocker(c, "x").TryLock(ctx)
		if err == nil || !strings.Contains(err.Error(), "call Client.Migrate") || errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("%s mode: TryLock on a table never migrated: %v; want an error saying to call Client.Migrate", m.name, err)
		}
	}
	err := c.WriteFenced(ctx, "r", 1, func(context.Context, pgx.Tx) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "call Client.Migrate") {
		t.Errorf("WriteFenced on a table never migrated: %v; want an error saying to call Client.Migrate", err)
	}
	// A session-mode attempt that failed after taking the advisory lock
	// leaves nothing behind: its connection was closed.
	key := pglock.New(nil, pglock.WithTable("never_migrated")).NewSessionMutex("x").AdvisoryKey()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := admin(t, sharedDB(t).URL(), "SELECT pid FROM pg_locks WHERE "+advisory, key)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends %v still hold the advisory lock of a failed attempt", left)
		}
	}
}

// A table in a schema of its own works, is migrated twice without harm,
// and its locks are not those of another table, in either mode.
func TestIntegrationTableInSchema(t *testing.T) {
	admin(t, sharedDB(t).URL(), "CREATE SCHEMA IF NOT EXISTS app")
	ctx := ctxFor(t, time.Minute)
	app := newClient(t, sharedDB(t).URL(), pglock.WithTable("app.Locks"))
	for range 2 {
		if err := app.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := admin(t, sharedDB(t).URL(), `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'app' AND c.relname IN ('Locks', 'Locks_fence_seq', 'Locks_fences')`); got[0] != "3" {
		t.Fatalf("%s of the 3 objects of app.Locks exist", got[0])
	}
	other := newClient(t, sharedDB(t).URL())
	for _, m := range modes {
		a, err := m.newLocker(app, "shared-name").TryLock(ctx)
		if err != nil {
			t.Fatalf("%s mode on app.Locks: %v", m.name, err)
		}
		b, err := m.newLocker(other, "shared-name").TryLock(ctx)
		if err != nil {
			t.Fatalf("%s mode: the same name on another table is held: %v", m.name, err)
		}
		a.Release(ctx)
		b.Release(ctx)
	}
}

// A session-mode lease gives its connection back to the pool as it found
// it: idle_session_timeout restored.
func TestIntegrationSessionRestoresConnection(t *testing.T) {
	pool := newPool(t, sharedDB(t).URL()+"&pool_max_conns=1")
	c := pglock.New(pool)
	t.Cleanup(func() { c.Close() })
	ctx := ctxFor(t, 10*time.Second)
	lease, err := c.NewSessionMutex("restore", pglock.WithTTL(2*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var setting string
	if err := pool.QueryRow(ctx, "SHOW idle_session_timeout").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "0" {
		t.Errorf("idle_session_timeout of the pool's connection after a release: %s; want 0, as it was", setting)
	}
}

// An attempt on a lock that is plainly held, in either mode, reads and
// nothing more: the row is neither updated nor locked (its xmin and xmax
// stay), and no fence is drawn.
func TestIntegrationHeldAttemptWritesNothing(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			name := unique("held")
			ctx := ctxFor(t, 10*time.Second)
			lease, err := m.newLocker(newClient(t, sharedDB(t).URL()), name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(ctx)
			state := func() string {
				return admin(t, sharedDB(t).URL(), `SELECT format('xmin %s, xmax %s, fence %s, sequence %s', l.xmin, l.xmax, l.fence, s.last_value)
					FROM dlock_leases l, dlock_leases_fence_seq s WHERE l.name = $1`, name)[0]
			}
			before := state()
			for _, other := range modes {
				l := other.newLocker(newClient(t, sharedDB(t).URL()), name)
				for range 5 {
					if _, err := l.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
						t.Fatalf("%s-mode TryLock of a held lock: %v; want ErrNotObtained", other.name, err)
					}
				}
			}
			if after := state(); after != before {
				t.Errorf("failed attempts changed the row or the sequence: %s -> %s", before, after)
			}
		})
	}
}

// A table of another shape under the Client's name is named as the
// problem.
func TestIntegrationForeignTable(t *testing.T) {
	table := unique("foreign")
	admin(t, sharedDB(t).URL(), "CREATE TABLE "+table+" (id int)")
	c := newClient(t, sharedDB(t).URL(), pglock.WithTable(table))
	_, err := c.NewMutex("x").TryLock(ctxFor(t, 10*time.Second))
	if want := "is not pglock's: give WithTable another name"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("TryLock on a table of another shape: %v; want an error mentioning %q", err, want)
	}
}
