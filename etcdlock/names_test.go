package etcdlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A lock name that is not valid UTF-8 is refused, as every backend
// refuses it, by every call that takes a name, before anything is
// written: etcd itself takes any bytes, which the dlock command could then
// neither show nor pass back to inspect or release.
func TestIntegrationNameNotUTF8(t *testing.T) {
	c := connect(t, []string{sharedEtcd(t).Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name = "bad-\xff-name"
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%s of a non-UTF-8 name: %v; want an error saying it is not valid UTF-8", what, err)
		}
	}
	_, err := c.NewMutex(name).TryLock(ctx)
	check("Mutex.TryLock", err)
	_, err = c.NewSemaphore(name, 2).TryLock(ctx)
	check("Semaphore.TryLock", err)
	_, err = c.NewRWMutex(name).Reader().TryLock(ctx)
	check("RWMutex reader's TryLock", err)
	_, err = c.NewElection(name).Leader(ctx)
	check("Election.Leader", err)
	_, err = c.Inspect(ctx, name)
	check("Inspect", err)
	_, err = c.ForceUnlock(ctx, name)
	check("ForceUnlock", err)
	if k := keys(t, dial(t, sharedEtcd(t).Addr()), "bad-"); len(k) != 0 {
		t.Errorf("keys left under bad-: %v", k)
	}
}

// A name whose last segment is "read", "write" or "permits-N", or empty
// ("a/read", "a/write", "a/permits-2", "a/"), gives its Mutex keys of the
// shape of a key of the lock "a" (an RWMutex's reader or writer, a
// Semaphore's permit, a Mutex): the locks of "a" would read them as their
// own, and ForceUnlock("a"), with "a" free, deleted the holder's key of
// "a/read", whose waiter then took it while the holder still held: two
// holders of one lock. Such a name is refused, before anything is
// written; any other ("a/b", "a/694d7c3b1f2e0a11", shaped like a Mutex's
// key of "a", and "a/read/b") is a lock of its own, which ForceUnlock("a")
// leaves alone.
func TestIntegrationNameShapedLikeParentsKey(t *testing.T) {
	c := connect(t, []string{sharedEtcd(t).Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parent := "names-" + t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, last := range []string{"read", "write", "permits-2", "", "b", "694d7c3b1f2e0a11"} {
		name := parent + "/" + last
		holder, err := c.NewMutex(name).TryLock(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "last segment") {
				t.Errorf("TryLock %q: %v; want granted, or refused naming its last segment", name, err)
			}
			continue
		}
		wctx, wcancel := context.WithCancel(ctx)
		got := make(chan dlock.Lease, 1)
		go func() {
			l, _ := c.NewMutex(name).Lock(wctx)
			got <- l
		}()
		time.Sleep(200 * time.Millisecond) // the waiter queues
		if deleted, err := c.ForceUnlock(ctx, parent); deleted || err != nil {
			t.Errorf("ForceUnlock %q (free) while %q is held = %v, %v; want nothing deleted", parent, name, deleted, err)
		}
		var waiter dlock.Lease
		select {
		case waiter = <-got:
			t.Errorf("%q: after ForceUnlock(%q), a waiter was granted (%v) while the holder (lost: %v) still held it: two holders", name, parent, waiter != nil, holder.Err())
		case <-time.After(500 * time.Millisecond):
			wcancel()
			waiter = <-got
		}
		wcancel()
		holder.Release(ctx)
		if waiter != nil {
			waiter.Release(ctx)
		}
	}
	// Such a segment elsewhere in the name is no key of "parent"'s.
	l, err := c.NewMutex(parent + "/read/b").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock %q: %v", parent+"/read/b", err)
	}
	if info, err := c.Inspect(ctx, parent); err != nil || info.Kind != dlock.KindFree {
		t.Errorf("Inspect %q while %q is held = %+v, %v; want it free", parent, parent+"/read/b", info, err)
	}
	l.Release(ctx)
}
