package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A lock whose last segment ends in "--" and digits ("/a/release--2024")
// is a lock of its own beside "/a": its path, a child of /a, is no lock
// node of /a's, and /a's locks and Inspect leave it out as they leave out
// every other such child. (It was read as a lock node whose ZooKeeper
// sequence counter had overflowed, and every lock on /a failed.)
func TestIntegrationNestedNameLikeOverflowedSequence(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	c := connect(t, servers)
	ctx := ctxFor(t, time.Minute)
	parent := uniquePath(t)
	for _, seg := range []string{"release--2024", "x--5", "v--0000000001"} {
		child := parent + "/" + seg
		held, err := c.NewMutex(child).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %s: %v", child, err)
		}
		l, err := c.NewMutex(parent).TryLock(ctx)
		if err != nil {
			t.Errorf("TryLock %s while %s is held: %v; want it granted: they are two locks", parent, child, err)
		} else {
			l.Release(ctx)
		}
		if info, err := c.Inspect(ctx, parent); err != nil || info.Kind != dlock.KindFree {
			t.Errorf("Inspect %s while %s is held = %+v, %v; want it free", parent, child, info, err)
		}
		if _, err := c.ForceUnlock(ctx, parent); err != nil {
			t.Errorf("ForceUnlock %s while %s is held: %v", parent, child, err)
		}
		if err := held.Release(ctx); err != nil {
			t.Errorf("Release %s: %v (ForceUnlock of %s must not touch it)", child, err, parent)
		}
	}
}
