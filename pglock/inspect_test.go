package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
)

// Inspect reports a name never locked and a released one as free, and a
// held one, in either mode, with its holder's token and fence and the
// time left on its row; ForceUnlock frees it for a waiter at once, and
// the old holder learns: at once in session mode (its session is
// ended), at its next renewal in lease mode.
func TestIntegrationInspectAndForceUnlock(t *testing.T) {
	url := sharedDB(t).URL()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			op := newClient(t, url)
			name := unique("inspect")
			if info, err := op.Inspect(ctx, name); err != nil || info.Kind != dlock.KindFree || info.Held() || info.Name != name {
				t.Fatalf("Inspect of a name never locked = %+v, %v; want free", info, err)
			}
			const ttl = 3 * time.Second
			held, err := m.newLocker(newClient(t, url), name, pglock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			info, err := op.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			want := dlock.Holder{Owner: held.Token(), Mode: dlock.ModeExclusive, Holds: 1, Fence: held.Fence()}
			got := info.Holders
			if len(got) == 1 {
				want.Where = got[0].Where
			}
			if info.Kind != dlock.KindMutex || len(got) != 1 || got[0] != want || info.Fence != held.Fence() ||
				info.TTL <= 0 || info.TTL > ttl {
				t.Fatalf("Inspect of a held lock = %+v; want a mutex held by %+v with a TTL up to %v", info, want, ttl)
			}
			if session := m.name == "session"; session != strings.Contains(want.Where, "backend") {
				t.Errorf("holder's Where = %q; want a backend named in session mode only", want.Where)
			}

			waiter := make(chan dlock.Lease, 1)
			go func() {
				l, err := m.newLocker(newClient(t, url), name, pglock.WithTTL(ttl),
					pglock.WithRetry(dlock.LinearBackoff(10*time.Second, 10*time.Second))).Lock(ctx)
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				waiter <- l
			}()
			time.Sleep(200 * time.Millisecond) // the waiter has tried once and waits for a notice
			forced := time.Now()
			if ok, err := op.ForceUnlock(ctx, name); !ok || err != nil {
				t.Fatalf("ForceUnlock of a held lock = %v, %v; want true", ok, err)
			}
			l := <-waiter
			if l == nil {
				return
			}
			defer l.Release(context.WithoutCancel(ctx))
			if took := time.Since(forced); took > 2*time.Second {
				t.Errorf("the waiter was granted %v after ForceUnlock; want it woken by the notice", took)
			}
			if l.Fence() <= held.Fence() {
				t.Errorf("the new fence %d is not above the old holder's %d", l.Fence(), held.Fence())
			}
			if m.name == "session" {
				select {
				case <-held.Done():
				case <-time.After(2 * time.Second):
					t.Fatal("the session-mode holder's lease did not end when ForceUnlock ended its session")
				}
				if err := held.Err(); !errors.Is(err, dlock.ErrLost) {
					t.Errorf("the old holder's Err = %v; want ErrLost", err)
				}
			} else if err := held.Refresh(ctx); !errors.Is(err, dlock.ErrTakenOver) {
				t.Errorf("the old holder's Refresh after ForceUnlock = %v; want ErrTakenOver", err)
			}
			if info, err := op.Inspect(ctx, name); err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != l.Token() {
				t.Errorf("Inspect after the hand-over = %+v, %v; want the waiter holding", info, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// A released row keeps its fence; its expiry is -infinity.
			if info, err := op.Inspect(ctx, name); err != nil || info.Kind != dlock.KindFree || info.Fence != l.Fence() || info.TTL != 0 {
				t.Errorf("Inspect of a released lock = %+v, %v; want free with the last fence %d", info, err, l.Fence())
			}
		})
	}
}

// ForceUnlock of a free name reports false and changes nothing; bad names
// get the error the locks give them, before any statement.
func TestIntegrationForceUnlockFreeAndBadNames(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	op := newClient(t, sharedDB(t).URL())
	if ok, err := op.ForceUnlock(ctx, unique("never")); ok || err != nil {
		t.Errorf("ForceUnlock of a name never locked = %v, %v; want false, nil", ok, err)
	}
	for _, name := range []string{"", strings.Repeat("x", pglock.MaxNameBytes+1), "bad\x00name"} {
		_, want := op.NewMutex(name).TryLock(ctx)
		if want == nil {
			t.Fatalf("TryLock of %q succeeded; the test needs a bad name", name)
		}
		if _, err := op.Inspect(ctx, name); err == nil || err.Error() != want.Error() {
			t.Errorf("Inspect(%.20q) = %v; want %q", name, err, want)
		}
		if ok, err := op.ForceUnlock(ctx, name); ok || err == nil || err.Error() != want.Error() {
			t.Errorf("ForceUnlock(%.20q) = %v, %v; want %q", name, ok, err, want)
		}
	}
}
