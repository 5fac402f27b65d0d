package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// A database restored from a backup taken before the holder's grant, or
// failed over to a copy that lags, has lost the holder's row: it grants
// no one the lock before the holder's Until, and the next holder's fence
// is higher. A copy on another server (another @@server_id: a promoted
// replica) is detected by default; one on the same server (a copied data
// directory, a disk snapshot) by the restart window.
func TestIntegrationRestoredDatabase(t *testing.T) {
	// The restore takes a second or two: the holder's lease must outlast
	// it for the test to mean anything.
	const ttl = 4 * time.Second
	window := []mysqllock.ClientOption{mysqllock.WithRestartWindow(ttl)}
	t.Parallel() // a server of its own
	srv := startDB(t)
	for i, tc := range []struct {
		name      string
		md        mode
		opts      []mysqllock.ClientOption
		newServer bool // the copy comes back as another server
	}{
		{"copy/window", leaseMode, window, false},
		{"copy/window/session", sessionMode, window, false},
		{"other-server/default", leaseMode, nil, true},
		{"other-server/default/session", sessionMode, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("restored")
			// The database has been in use: an attempt has recorded the
			// server's identity.
			if before, err := tc.md.newLocker(newClient(t, srv.DSN(), tc.opts...), unique("before"), mysqllock.WithTTL(ttl)).Lock(ctx); err != nil {
				t.Fatal(err)
			} else {
				before.Release(ctx)
			}
			backup, err := srv.Backup()
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, srv.Addr())
			held, err := tc.md.newLocker(newClient(t, strings.Replace(srv.DSN(), srv.Addr(), proxy.Addr(), 1), tc.opts...), name, mysqllock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The holder hears nothing more: it counts on its Until.
			proxy.Blackhole(true)
			defer proxy.Reset()
			until := held.Until()
			restored := time.Now()
			if err := srv.RestoreBackup(backup); err != nil {
				t.Fatal(err)
			}
			if tc.newServer {
				admin(t, srv, fmt.Sprintf("SET GLOBAL server_id = %d", 100+i))
			}
			up := time.Now()
			if up.After(until) {
				t.Logf("the restore took %v, past the holder's Until: nothing to check", up.Sub(restored))
			}
			next := tc.md.newLocker(newClient(t, srv.DSN(), tc.opts...), name, mysqllock.WithTTL(ttl))
			if got, err := next.TryLock(ctx); got != nil {
				t.Errorf("TryLock granted the lock %v after the server was back, %v before the holder's Until", time.Since(up), time.Until(until))
				got.Release(ctx)
			} else if !errors.Is(err, dlock.ErrNotObtained) || time.Now().Before(until) && (err == nil || !strings.Contains(err.Error(), "restart window")) {
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

// A lock whose TTL is longer than the Client's restart window is refused,
// and so is a window that is not positive, with errors naming the option.
func TestRestartWindowArguments(t *testing.T) {
	ctx := context.Background()
	pool := openDB(t, "u:p@tcp(127.0.0.1:1)/db") // never reached
	c := mysqllock.New(pool, mysqllock.WithRestartWindow(time.Second))
	defer c.Close()
	if _, err := c.NewMutex("x", mysqllock.WithTTL(2*time.Second)).TryLock(ctx); err == nil || !strings.Contains(err.Error(), "WithRestartWindow(2s)") {
		t.Errorf("TTL 2s with a restart window of 1s: %v; want an error naming WithRestartWindow(2s)", err)
	}
	bad := mysqllock.New(pool, mysqllock.WithRestartWindow(-time.Second))
	defer bad.Close()
	if _, err := bad.NewMutex("x").TryLock(ctx); err == nil || !strings.Contains(err.Error(), "WithRestartWindow") {
		t.Errorf("a negative restart window: %v; want an error naming WithRestartWindow", err)
	}
}

// With WithRestartWindow(d), no lock is granted for d after the server
// started, whatever the fraction of a second at which it did: the
// server's Uptime is the difference of two readings of its clock in whole
// seconds, up to a second more than it has run. The server is started
// late in a second of the clock, and first asked early in a later one,
// where Uptime overstates the most; twice, in case a start is late
// enough to fall into the next second.
func TestIntegrationRestartWindowAfterStart(t *testing.T) {
	const window = 2 * time.Second
	t.Parallel() // a server of its own, restarted
	srv := startDB(t)
	at := func(frac time.Duration) { // waits for the next time the clock's second reaches frac
		next := time.Now().Truncate(time.Second).Add(frac)
		if next.Before(time.Now()) {
			next = next.Add(time.Second)
		}
		time.Sleep(time.Until(next))
	}
	for _, frac := range []time.Duration{750 * time.Millisecond, 850 * time.Millisecond} {
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		at(frac)
		started := time.Now() // the server starts after this
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		at(50 * time.Millisecond)
		ctx := ctxFor(t, time.Minute)
		got, err := newClient(t, srv.DSN(), mysqllock.WithRestartWindow(window)).NewMutex(unique("after-start"), mysqllock.WithTTL(window)).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock after the restart: %v", err)
		}
		if early := started.Add(window).Sub(time.Now()); early > 0 {
			t.Errorf("started at %v past a second: granted %v before the end of the restart window %v after the server started", frac, early, window)
		}
		got.Release(ctx)
	}
}
