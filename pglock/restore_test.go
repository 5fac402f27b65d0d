package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// A database restored from a backup taken before the holder's grant, or
// failed over to a copy that lags, has lost the holder's row: it grants
// no one the lock before the holder's Until, and the next holder's fence
// is higher. A restore that begins a new timeline (as a promoted replica
// or a point-in-time recovery does) is detected by default; one that
// keeps the timeline (a copied data directory, a disk snapshot) by the
// restart window.
func TestIntegrationRestoredDatabase(t *testing.T) {
	// The restore takes a second or two: the holder's lease must outlast
	// it for the test to mean anything.
	const ttl = 4 * time.Second
	window := []pglock.ClientOption{pglock.WithRestartWindow(ttl)}
	t.Parallel() // a server of its own
	pg := testenv.StartPostgres(t)
	migrate(t, pg.URL())
	for _, tc := range []struct {
		name        string
		m           mode
		opts        []pglock.ClientOption
		newTimeline bool
		migrate     bool // Migrate after the restore
	}{
		{"copy/window", leaseMode, window, false, false},
		{"copy/window/session/migrate", sessionMode, window, false, true},
		{"new-timeline/default/migrate", leaseMode, nil, true, true},
		{"new-timeline/default/session", sessionMode, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("restored")
			// The database has been in use: an attempt has recorded the
			// server's identity.
			if before, err := tc.m.newLocker(newClient(t, pg.URL(), tc.opts...), unique("before"), pglock.WithTTL(ttl)).Lock(ctx); err != nil {
				t.Fatal(err)
			} else {
				before.Release(ctx)
			}
			backup, err := pg.Backup()
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, pg.Addr())
			app := unique("holder")
			held, err := tc.m.newLocker(newClient(t, via(pg, proxy.Addr(), app), tc.opts...), name, pglock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The holder hears nothing more: it counts on its Until.
			proxy.Blackhole(true)
			defer proxy.Reset()
			until := held.Until()
			restored := time.Now()
			if err := pg.RestoreBackup(backup, tc.newTimeline); err != nil {
				t.Fatal(err)
			}
			up := time.Now()
			if up.After(until) {
				t.Logf("the restore took %v, past the holder's Until: nothing to check", up.Sub(restored))
			}
			if tc.migrate {
				migrate(t, pg.URL())
			}
			next := tc.m.newLocker(newClient(t, pg.URL(), tc.opts...), name, pglock.WithTTL(ttl))
			if got, err := next.TryLock(ctx); got != nil {
				t.Errorf("TryLock granted the lock %v after the server was back, %v before the holder's Until", time.Since(up), time.Until(until))
				got.Release(ctx)
			} else if !errors.Is(err, dlock.ErrNotObtained) || time.Now().Before(until) && !contains(err, "restart window") {
				t.Errorf("TryLock within the window: %v; want ErrNotObtained naming the restart window", err)
			}
			got, err := next.Lock(ctx)
			if err != nil {
				t.Fatalf("Lock after the restore: %v", err)
			}
			defer got.Release(ctx)
			obtained := time.Now()
			t.Logf("restored in %v; the next holder got the lock %v after the server was back, %v after the holder's Until",
				up.Sub(restored), obtained.Sub(up), obtained.Sub(until))
			if obtained.Before(until) {
				t.Errorf("a second holder was granted the lock %v before the first one's Until", until.Sub(obtained))
			}
			if got.Fence() <= held.Fence() {
				t.Errorf("fence %d after %d", got.Fence(), held.Fence())
			}
		})
	}
}

// contains reports whether err's text holds s.
func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// A lock whose TTL is longer than the Client's restart window is refused,
// and so is a window that is not positive, with errors naming the option.
func TestRestartWindowArguments(t *testing.T) {
	ctx := context.Background()
	c := pglock.New(unreachable(t), pglock.WithRestartWindow(time.Second))
	defer c.Close()
	if _, err := c.NewMutex("x", pglock.WithTTL(2*time.Second)).TryLock(ctx); err == nil || !contains(err, "WithRestartWindow(2s)") {
		t.Errorf("TTL 2s with a restart window of 1s: %v; want an error naming WithRestartWindow(2s)", err)
	}
	bad := pglock.New(unreachable(t), pglock.WithRestartWindow(0))
	defer bad.Close()
	if _, err := bad.NewMutex("x").TryLock(ctx); err == nil || !contains(err, "WithRestartWindow") {
		t.Errorf("a restart window of 0: %v; want an error naming WithRestartWindow", err)
	}
}

// A role that may not read the server's identity (a managed service that
// revokes pg_control_system) gets an error naming the way out, and locks
// with WithoutRestartDetection.
func TestIntegrationRestartDetectionNotAllowed(t *testing.T) {
	t.Parallel() // a server of its own
	pg := startDB(t)
	for _, sql := range []string{
		"CREATE ROLE plain LOGIN",
		"GRANT SELECT, INSERT, UPDATE ON dlock_leases TO plain",
		"GRANT USAGE ON SEQUENCE dlock_leases_fence_seq TO plain",
		"REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC",
	} {
		admin(t, pg.URL(), sql)
	}
	url := strings.Replace(pg.URL(), testenv.PostgresUser+"@", "plain@", 1)
	ctx := ctxFor(t, time.Minute)
	name := unique("not-allowed")
	if _, err := newClient(t, url).NewMutex(name).TryLock(ctx); !contains(err, "WithoutRestartDetection") {
		t.Errorf("TryLock without EXECUTE on pg_control_system: %v; want an error naming WithoutRestartDetection", err)
	}
	l, err := newClient(t, url, pglock.WithoutRestartDetection()).NewMutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with WithoutRestartDetection: %v", err)
	}
	l.Release(ctx)
}
