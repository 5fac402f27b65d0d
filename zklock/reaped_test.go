package zklock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A parent that ZooKeeper's container reaper (or another client's clean-up)
// deletes between its creation and its child's does not fail a Lock: the
// parents are made again. A deleter that removes the shared parent whenever
// it is empty stands in for the reaper, which ran in a fresh-clone make test
// while another test locked a name: "creating the parent node …: zk: node
// does not exist" (exit 69 from dlock run).
func TestIntegrationParentReapedWhileLocking(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	c := connect(t, []string{z.Addr()})
	raw := admin(t, []string{z.Addr()})
	parent := "/dlock/reaped-" + fmt.Sprint(time.Now().UnixNano())

	stop := make(chan struct{})
	var deleter sync.WaitGroup
	var deletes atomic.Int64
	deleter.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if kids, _, err := raw.Children(parent); err == nil {
				for _, k := range kids {
					if raw.Delete(parent+"/"+k, -1) == nil {
						deletes.Add(1)
					}
				}
			}
			if raw.Delete(parent, -1) == nil {
				deletes.Add(1)
			}
		}
	})
	defer func() { close(stop); deleter.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rounds = 150
	var failed int
	var first error
	for i := range rounds {
		name := fmt.Sprintf("%s/n%d", parent, i)
		lease, err := c.NewMutex(name).TryLock(ctx)
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		lease.Release(ctx)
	}
	t.Logf("measured: %d of %d TryLocks failed while parents were deleted %d times", failed, rounds, deletes.Load())
	if failed > 0 {
		t.Fatalf("%d of %d TryLocks failed while their parent was deleted under them; first: %v", failed, rounds, first)
	}
}
