package mysqllock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/mysqllock"
)

// The server killed with SIGKILL and started again: a session-mode holder
// learns at its next check, a lease-mode one by its Until; the row, which
// survived, keeps the lock from anyone else until it expires; the next
// holder's fence is higher.
func TestIntegrationServerKilledAndRestarted(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			t.Parallel()
			srv := startDB(t)
			ctx := ctxFor(t, time.Minute)
			const ttl = 2 * time.Second
			key := unique("killed")
			held, err := md.newLocker(newClient(t, srv.DSN()), key, mysqllock.WithTTL(ttl)).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-held.Done():
			case <-time.After(time.Until(held.Until()) + 100*time.Millisecond):
				t.Fatalf("Done still open %v after Until", time.Since(held.Until()))
			}
			if md.name == "session" {
				if !errors.Is(held.Err(), mysqllock.ErrSessionLost) {
					t.Errorf("Err = %v; want ErrSessionLost", held.Err())
				}
				// The check interval (200ms), and a loaded machine's delay
				// in seeing the connection go (594ms at load 10): still a
				// third of the TTL, which a lease mode holder would wait.
				if took := time.Since(killed); took > 200*time.Millisecond+600*time.Millisecond {
					t.Errorf("session loss reported %v after the kill; want within its check interval (200ms) and 600ms", took)
				}
			} else if !errors.Is(held.Err(), dlock.ErrLost) {
				t.Errorf("Err = %v; want ErrLost", held.Err())
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			next := md.newLocker(newClient(t, srv.DSN()), key, mysqllock.WithTTL(ttl))
			got, err := next.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release(ctx)
			if time.Since(killed) < ttl-dlock.Drift(ttl)-time.Millisecond {
				t.Errorf("the lock was free again %v after the kill; the row should hold it for the TTL %v", time.Since(killed), ttl)
			}
			if got.Fence() <= held.Fence() {
				t.Errorf("fence after restart %d; want more than %d", got.Fence(), held.Fence())
			}
		})
	}
}

// dlockSlack is room for a loaded machine in timing checks.
const dlockSlack = 300 * time.Millisecond

// KILL CONNECTION of a session-mode holder ends its lease at its next
// check; the row stays held until the holder releases it, which frees it.
func TestIntegrationKillConnectionOfHolder(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	key := unique("killconn")
	c := newClient(t, srv.DSN())
	m := c.NewSessionMutex(key, mysqllock.WithTTL(time.Second))
	held, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	who := admin(t, srv, "SELECT IS_USED_LOCK(?)", m.LockName())
	if len(who) != 1 || who[0] == "" {
		t.Fatalf("IS_USED_LOCK(%s) = %v; want the holder's connection", m.LockName(), who)
	}
	info, err := c.Inspect(ctx, key)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Where != "session mode, GET_LOCK lock held by connection "+who[0] {
		t.Errorf("Inspect = %+v, %v; want the holder in session mode on connection %s", info, err, who[0])
	}
	start := time.Now()
	admin(t, srv, "KILL CONNECTION "+who[0])
	select {
	case <-held.Done():
		t.Logf("loss of the session reported %v after KILL CONNECTION", time.Since(start))
	case <-time.After(100*time.Millisecond + dlockSlack): // the check interval of a 1s TTL
		t.Fatal("Done still open after KILL CONNECTION")
	}
	if !errors.Is(held.Err(), mysqllock.ErrSessionLost) || !errors.Is(held.Err(), dlock.ErrLost) {
		t.Errorf("Err = %v; want ErrLost and ErrSessionLost", held.Err())
	}
	other := newClient(t, srv.DSN()).NewMutex(key)
	if _, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock while the dead session's row is held: %v; want ErrNotObtained", err)
	}
	if err := held.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release after the loss: %v; want ErrNotHeld", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := other.TryLock(ctx)
		if err == nil {
			got.Release(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("row not freed after the holder's Release: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A waiter blocked while the server is paused gets the lock once it
// resumes and the holder releases.
func TestIntegrationPausedServerWaiter(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			t.Parallel()
			srv := startDB(t)
			ctx := ctxFor(t, time.Minute)
			key := unique("paused")
			holder, err := md.newLocker(newClient(t, srv.DSN()), key, mysqllock.WithTTL(3*time.Second)).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := md.newLocker(newClient(t, srv.DSN()), key, mysqllock.WithTTL(3*time.Second)).Lock(ctx)
				if err == nil {
					if l.Fence() <= holder.Fence() {
						err = errors.New("fence did not increase")
					}
					l.Release(ctx)
				}
				got <- err
			}()
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			if err := holder.Release(ctx); err != nil {
				t.Errorf("Release after the pause: %v", err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not get the lock after the release")
			}
		})
	}
}

// A Mutex and a SessionMutex of one name exclude each other.
func TestIntegrationModesExcludeEachOther(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	for _, first := range modes {
		for _, second := range modes {
			key := unique("modes")
			a, err := first.newLocker(newClient(t, srv.DSN()), key).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b := second.newLocker(newClient(t, srv.DSN()), key)
			if _, err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s held, %s TryLock: %v; want ErrNotObtained", first.name, second.name, err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := b.TryLock(ctx)
			if err != nil {
				t.Fatalf("%s released, %s TryLock: %v", first.name, second.name, err)
			}
			if l.Fence() <= a.Fence() {
				t.Errorf("fence %d after %d", l.Fence(), a.Fence())
			}
			l.Release(ctx)
		}
	}
}

// Fences keep rising after the table is truncated (as after a restore that
// lost the rows): the next grant's fence is lifted to the database's
// clock, above every earlier one.
func TestIntegrationFencesAfterTruncate(t *testing.T) {
	srv := startDB(t)
	ctx := ctxFor(t, time.Minute)
	for _, md := range modes {
		key := unique("truncate")
		l := md.newLocker(newClient(t, srv.DSN()), key)
		var last uint64
		for range 3 { // the row's fence plus one, a few times over
			held, err := l.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if held.Fence() <= last {
				t.Fatalf("%s: fence %d after %d", md.name, held.Fence(), last)
			}
			last = held.Fence()
			held.Release(ctx)
		}
		admin(t, srv, "TRUNCATE TABLE "+mysqllock.DefaultTable)
		held, err := l.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if held.Fence() <= last {
			t.Errorf("%s: fence %d after the truncate; want more than %d", md.name, held.Fence(), last)
		}
		held.Release(ctx)
	}
}
