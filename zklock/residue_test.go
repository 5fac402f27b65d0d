package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// subtree counts the nodes under path, path included; 0 if it is gone.
func subtree(t testing.TB, c *zk.Conn, path string) int {
	t.Helper()
	ok, _, err := c.Exists(path)
	if err != nil {
		t.Fatalf("Exists(%s): %v", path, err)
	}
	if !ok {
		return 0
	}
	n := 1
	for _, kid := range children(t, c, path) {
		n += subtree(t, c, path+"/"+kid)
	}
	return n
}

// Every node a lock wrote goes within the documented horizon once its
// locks and waiters are gone: lock nodes with their release (or their
// waiter's failure), the lock paths (container nodes) within one container
// check of the ensemble per level of the path (issue 17).
func TestIntegrationNoNodeOutlivesItsLock(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	servers := []string{sharedZK(t).Addr()}
	adm := admin(t, servers)
	root := uniquePath(t)
	s := connect(t, servers)
	other := connect(t, servers)
	const names = 25
	for i := range names {
		for _, l := range []dlock.Locker{
			s.NewMutex(fmt.Sprintf("%s/mutex-%d", root, i)),
			s.NewRWMutex(fmt.Sprintf("%s/rw-%d", root, i)).Reader(),
			s.NewRWMutex(fmt.Sprintf("%s/rw-%d", root, i)).Writer(),
			s.NewSemaphore(fmt.Sprintf("%s/sem-%d", root, i), 2),
		} {
			lease, err := l.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// A TryLock that fails, and a Lock whose wait is cut short.
		path := fmt.Sprintf("%s/busy-%d", root, i)
		held := mustLock(t, ctx, s.NewMutex(path))
		if _, err := other.NewMutex(path).TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("TryLock of a held lock = %v", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, err := other.NewMutex(path).Lock(wctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("Lock of a held lock with 20ms to wait = %v", err)
		}
		cancel()
		held.Release(ctx)
	}
	during := subtree(t, adm, root)
	// Lock paths are two levels below the shared /dlock-test: the leaves go
	// at the first container check after their last child, root at the
	// next; one more check for the phase, and 5s for a loaded machine.
	horizon := 3*testenv.ZooKeeperContainerCheck + 5*time.Second
	released := time.Now()
	for subtree(t, adm, root) != 0 {
		if time.Since(released) > horizon {
			t.Fatalf("%d nodes under %s %v after the last release (%d just after); want none", subtree(t, adm, root), root, horizon, during)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d nodes under %s after the last release, none %v later", during, root, time.Since(released).Round(100*time.Millisecond))
}

// An attempt that created the lock path and then failed before it made
// its node (here: the path's ACL refuses the node) deletes the path: the
// ensemble reaps a container only once it has had a child, so it would
// stay for ever. Close waits for that clean-up (issue 17).
func TestIntegrationFailedAttemptLeavesNoPath(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	adm := admin(t, servers)
	root := uniquePath(t)
	makePath(t, adm, root, zk.WorldACL(zk.PermAll))
	t.Cleanup(func() { adm.Delete(root, -1) })
	// Nodes this Client creates let nobody create children under them.
	s, err := zklock.New(ctxFor(t, 20*time.Second), servers, zklock.WithSessionTimeout(testSessionTimeout),
		zklock.WithACL(zk.WorldACL(zk.PermRead|zk.PermWrite|zk.PermDelete|zk.PermAdmin)...))
	if err != nil {
		t.Fatal(err)
	}
	path := root + "/lock"
	if _, err := s.NewMutex(path).TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("TryLock under a path that refuses children = %v; want zk.ErrNoAuth", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if left := children(t, adm, root); len(left) != 0 {
		// Wait past a container check to show it stays.
		time.Sleep(2 * testenv.ZooKeeperContainerCheck)
		t.Errorf("after the failed attempt and Close: %v under %s, still %v after %v", left, root, children(t, adm, root), 2*testenv.ZooKeeperContainerCheck)
	}
}
