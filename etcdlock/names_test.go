package etcdlock_test

import (
	"context"
	"strings"
	"testing"
	"time"
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
