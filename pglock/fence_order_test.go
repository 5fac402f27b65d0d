package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// noop is a fenced write that writes nothing: the fence check is the test.
func noop(context.Context, pgx.Tx) error { return nil }

// A database that fails over to a copy taken many grants earlier (its
// lease rows, fences table and sequence all lag) still gives the next
// holder a higher fence than the last one before the failover, at once,
// without anyone running Migrate: the new holder's fenced write is
// accepted, and the old holder's late write is refused.
func TestIntegrationFencesAfterLaggingRestore(t *testing.T) {
	const grants = 80
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			pg := sharedDB(t)
			table, name, resource := unique("lagging"), unique("lagging"), unique("lagging/resource")
			proxy := testenv.StartProxy(t, pg.Addr())
			app := unique("old-holder")
			old := newClient(t, via(pg, proxy.Addr(), app), pglock.WithTable(table))
			fresh := newClient(t, pg.URL(), pglock.WithTable(table))
			ctx := ctxFor(t, time.Minute)
			if err := fresh.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			l := m.newLocker(old, name, pglock.WithTTL(5*time.Second))
			grant := func() dlock.Lease {
				t.Helper()
				lease, err := l.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := old.WriteFenced(ctx, resource, lease.Fence(), noop); err != nil {
					t.Fatal(err)
				}
				return lease
			}
			lease := grant()
			lease.Release(ctx)

			// The copy, taken now.
			seq := table + "_fence_seq"
			backup := []string{
				fmt.Sprintf("CREATE TABLE %s_copy AS SELECT * FROM %s", table, table),
				fmt.Sprintf("CREATE TABLE %s_fences_copy AS SELECT * FROM %s_fences", table, table),
				fmt.Sprintf("CREATE TABLE %s_seq_copy AS SELECT last_value, is_called FROM %s", table, seq),
			}
			for _, sql := range backup {
				admin(t, pg.URL(), sql)
			}
			for range grants - 1 {
				grant().Release(ctx)
			}
			last := grant() // still held when the database fails over

			// The failover: every session ends, the holder hears nothing,
			// and the database comes back as the copy.
			proxy.Blackhole(true)
			defer func() { proxy.Blackhole(false); proxy.Reset() }() // so that the old client closes at once
			terminate(t, pg, app)
			restore := []string{
				fmt.Sprintf("DELETE FROM %s", table),
				fmt.Sprintf("INSERT INTO %s SELECT * FROM %s_copy", table, table),
				fmt.Sprintf("DELETE FROM %s_fences", table),
				fmt.Sprintf("INSERT INTO %s_fences SELECT * FROM %s_fences_copy", table, table),
				fmt.Sprintf("SELECT setval('%s', last_value, is_called) FROM %s_seq_copy", seq, table),
			}
			for _, sql := range restore {
				admin(t, pg.URL(), sql)
			}

			next, err := m.newLocker(fresh, name).Lock(ctxFor(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer next.Release(ctx)
			if next.Fence() <= last.Fence() {
				t.Errorf("the first grant after the failover has fence %d, %d below the last grant's %d",
					next.Fence(), last.Fence()-next.Fence(), last.Fence())
			}
			if err := fresh.WriteFenced(ctx, resource, next.Fence(), noop); err != nil {
				t.Errorf("the new holder's fenced write: %v", err)
			}
			if err := fresh.WriteFenced(ctx, resource, last.Fence(), noop); !errors.Is(err, pglock.ErrStaleFence) {
				t.Errorf("the old holder's late write with fence %d after the new holder's %d: %v; want ErrStaleFence",
					last.Fence(), next.Fence(), err)
			}
		})
	}
}

// An acquire whose backend stalls on its way to the row, while another
// client is granted the lock and the row is then deleted behind pglock's
// back, is granted a fence above the other's when it goes on: a later
// grant's fence never goes back. The stall is a trigger that waits for an
// advisory lock the test holds, for the stalled client's sessions only.
// The stalled acquire runs in each mode; the other is in lease mode (in
// session mode it would keep the advisory lock, and with it the stalled
// one out).
func TestIntegrationFenceOfStalledAcquire(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			pg := sharedDB(t)
			table, name, resource, app := unique("stalled"), unique("stalled"), unique("stalled/resource"), unique("stalled")
			stall := rand.Int64()
			ctx := ctxFor(t, time.Minute)
			other := newClient(t, pg.URL(), pglock.WithTable(table))
			if err := other.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			admin(t, pg.URL(), fmt.Sprintf(`CREATE FUNCTION %s_stall() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF current_setting('application_name') = '%s' THEN
						PERFORM pg_advisory_xact_lock_shared(%d);
					END IF;
					RETURN NEW;
				END $$`, table, app, stall))
			admin(t, pg.URL(), fmt.Sprintf("CREATE TRIGGER stall BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION %s_stall()", table, table))

			gate, err := pgx.Connect(ctx, pg.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer gate.Close(context.Background())
			if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", stall); err != nil {
				t.Fatal(err)
			}
			stalled := newClient(t, pg.URL()+"&application_name="+app, pglock.WithTable(table))
			type result struct {
				lease dlock.Lease
				err   error
			}
			got := make(chan result, 1)
			go func() {
				l, err := m.newLocker(stalled, name).TryLock(ctx)
				got <- result{l, err}
			}()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var waiting bool
				if err := gate.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'advisory')", app).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the stalled client's acquire never reached the trigger")
				}
			}

			first, err := other.NewMutex(name).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock while the other acquire is stalled: %v", err)
			}
			if err := other.WriteFenced(ctx, resource, first.Fence(), noop); err != nil {
				t.Fatal(err)
			}
			admin(t, pg.URL(), fmt.Sprintf("DELETE FROM %s WHERE name = $1", table), name)
			if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", stall); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("the stalled acquire, after the row was deleted: %v", r.err)
			}
			defer r.lease.Release(ctx)
			if r.lease.Fence() <= first.Fence() {
				t.Errorf("the stalled acquire was granted fence %d after the grant of %d", r.lease.Fence(), first.Fence())
			}
			if err := stalled.WriteFenced(ctx, resource, r.lease.Fence(), noop); err != nil {
				t.Errorf("the current holder's fenced write: %v", err)
			}
		})
	}
}

// Fences stay below 2^53, which JSON and JavaScript read exactly: a grant
// whose fence would be larger (here the sequence was set above it by
// hand) is refused with an error that says so, and leaves nothing held.
func TestIntegrationFenceAbove2To53Refused(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			pg := sharedDB(t)
			table, name := unique("huge"), unique("huge")
			c := newClient(t, pg.URL(), pglock.WithTable(table))
			ctx := ctxFor(t, 30*time.Second)
			if err := c.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			admin(t, pg.URL(), fmt.Sprintf("SELECT setval('%s_fence_seq', 9007199254740992)", table)) // 2^53
			for range 2 {                                                                             // the second finds the row as the first left it
				lease, err := m.newLocker(c, name).TryLock(ctx)
				if err == nil || !strings.Contains(err.Error(), "above 2^53-1") {
					t.Fatalf("TryLock with the sequence at 2^53: %v, fence %v; want an error about 2^53", err, fenceOf(lease))
				}
			}
			if held := admin(t, pg.URL(), fmt.Sprintf("SELECT token FROM %s WHERE name = $1 AND token <> ''", table), name); len(held) > 0 {
				t.Errorf("the refused grant left its row held by %q", held)
			}
			key := pglock.New(nil, pglock.WithTable(table)).NewSessionMutex(name).AdvisoryKey()
			if held := admin(t, pg.URL(), "SELECT pid FROM pg_locks WHERE "+advisory, key); len(held) > 0 {
				t.Errorf("the refused grant left the advisory lock held by backend %s", held)
			}
		})
	}
}
