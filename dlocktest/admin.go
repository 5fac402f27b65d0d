package dlocktest

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// adminName returns the name the backend's dlock.Admin knows the lock
// NewLocker makes for key by.
func (s *suite) adminName(key string) string {
	if s.b.LockName != nil {
		return s.b.LockName(key)
	}
	return key
}

// adminForceUnlock: the backend's Client is a dlock.Admin. Its Inspect
// shows the holder of a held lock; its ForceUnlock reports that the lock
// was held and frees it, so that a waiter is granted it, and the holder's
// lease reports the loss (by its Until at latest); Inspect then says the
// lock is free, as it does of a name never locked, and ForceUnlock of a
// free lock reports that nothing was held.
func (s *suite) adminForceUnlock(t *testing.T) {
	if s.b.Admin == nil {
		t.Fatal("Backend.Admin is nil: every backend's Client is a dlock.Admin, and the suite needs one to check it")
	}
	key := uniqueKey(t)
	name := s.adminName(key)
	const ttl = 3 * time.Second
	ctx := ctxFor(t, time.Minute)
	adm := s.b.Admin(t)

	if info, err := adm.Inspect(ctx, s.adminName(key+"-never")); err != nil || info.Held() || info.Kind != dlock.KindFree {
		t.Errorf("Inspect of a name never locked = %+v, %v; want free", info, err)
	}

	held := mustLock(t, ctx, s.b.NewLocker(t, key, Options{TTL: ttl}))
	info, err := adm.Inspect(ctx, name)
	if err != nil || !info.Held() || len(info.Holders) != 1 {
		t.Fatalf("Inspect(%q) while held = %+v, %v; want one holder", name, info, err)
	}
	if k := info.Kind; (k == dlock.KindMutex || k == dlock.KindFairMutex) && info.Holders[0].Owner != held.Token() {
		t.Errorf("Inspect's holder is %q; want the lease's token %q", info.Holders[0].Owner, held.Token())
	}

	obs, waiting := waitingObserver()
	got := startLock(ctx, s.b.NewLocker(t, key, Options{TTL: ttl, Observer: obs}))
	select {
	case <-waiting:
	case r := <-got:
		t.Fatalf("the waiter's Lock returned while the lock was held: %v, %v", r.lease, r.err)
	case <-ctx.Done():
		t.Fatal("the waiter never began to wait")
	}

	forced := time.Now()
	ok, err := adm.ForceUnlock(ctx, name)
	if err != nil || !ok {
		t.Fatalf("ForceUnlock(%q) of a held lock = %v, %v; want true, nil", name, ok, err)
	}
	// A waiter learns of the free lock as it learns of a release, or at
	// its next attempt; the holder at its next renewal, every TTL/3, and
	// by its Until at latest.
	var next dlock.Lease
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter's Lock after ForceUnlock: %v", r.err)
		}
		next = r.lease
		t.Logf("measured: waiter granted %v after ForceUnlock returned", r.at.Sub(forced).Round(time.Millisecond))
	case <-time.After(ttl + Slack):
		t.Fatalf("the waiter was not granted the lock %v after ForceUnlock", ttl+Slack)
	}
	doneAt := WaitDoneByUntil(t, held, time.Until(held.Until())+5*time.Second, "ForceUnlock, by the lease's Until")
	t.Logf("measured: holder's lease ended %v after ForceUnlock: %v", doneAt.Sub(forced).Round(time.Millisecond), held.Err())
	if err := held.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("the forced-out holder's Err() = %v; want an error matching ErrLost", err)
	}
	if err := held.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("the forced-out holder's Release = %v; want ErrNotHeld", err)
	}

	if err := next.Release(ctx); err != nil {
		t.Fatalf("the waiter's Release: %v", err)
	}
	// A release may finish on some servers in the background (Redlock:
	// a node whose vote came after the grant is cleaned up within 1.3s),
	// so the name is free soon after Release, not at once.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err = adm.Inspect(ctx, name)
		if err == nil && !info.Held() && info.Kind == dlock.KindFree || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || info.Held() || info.Kind != dlock.KindFree {
		t.Errorf("Inspect(%q) 3s after release = %+v, %v; want free", name, info, err)
	}
	if ok, err := adm.ForceUnlock(ctx, name); err != nil || ok {
		t.Errorf("ForceUnlock(%q) of a free lock = %v, %v; want false, nil", name, ok, err)
	}
}
