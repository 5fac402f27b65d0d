package zklock_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// awaitLatch asks a Curator LeaderLatch whether it leads until it answers
// want, or 10 seconds have passed; it returns the last answer.
func awaitLatch(cur *curator, id, want string) string {
	var a string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if a = cur.do("leader", id); a == want {
			break
		}
	}
	return a
}

// Curator's LeaderLatch does not share zklock's layout (see the package
// doc): it sorts its own "latch-" nodes by their sequence and every other
// node after them, so on a path where a zklock Election leads, a
// LeaderLatch leads too, and the zklock leader is not told; and zklock
// refuses a path that holds a latch node, with an error naming it, rather
// than campaign or report a leader there.
func TestIntegrationCuratorLeaderLatchNotShared(t *testing.T) {
	zc, cur, path, _ := curatorPair(t)
	ctx := ctxFor(t, time.Minute)
	e := zc.NewElection(path)
	l, err := e.Campaign(ctx, "zklock")
	if err != nil {
		t.Fatal(err)
	}
	latch := cur.newLock("latch", path)
	cur.do("start", latch)
	if a := awaitLatch(cur, latch, "ok leader"); a != "ok leader" {
		t.Errorf("Curator's LeaderLatch beside zklock's leader answers %q: it no longer leads beside it; zklock's package doc says it does", a)
	}
	if err := l.Err(); err != nil {
		t.Errorf("zklock's leader beside the LeaderLatch: %v; the package doc says it is not told", err)
	}
	if ld, err := e.Leader(ctx); err == nil || !strings.Contains(err.Error(), "latch-") {
		t.Errorf("zklock's Leader beside the LeaderLatch = %+v, %v; want an error naming its latch- node", ld, err)
	}
	cur.do("close", latch)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	latch = cur.newLock("latch", path)
	cur.do("start", latch)
	if a := awaitLatch(cur, latch, "ok leader"); a != "ok leader" {
		t.Fatalf("Curator's LeaderLatch alone answers %q; want it to lead", a)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l, err := e.Campaign(short, "zklock"); err == nil || !strings.Contains(err.Error(), "latch-") || short.Err() != nil {
		if l != nil {
			l.Release(ctx)
		}
		t.Errorf("zklock's Campaign on a LeaderLatch's path = %v; want at once an error naming its latch- node", err)
	} else {
		t.Logf("measured: zklock's Campaign on a LeaderLatch's path: %v", err)
	}
	if ld, err := e.Leader(ctx); err == nil || !strings.Contains(err.Error(), "latch-") {
		t.Errorf("zklock's Leader on a LeaderLatch's path = %+v, %v; want an error naming its latch- node", ld, err)
	} else {
		t.Logf("measured: zklock's Leader on a LeaderLatch's path: %v", err)
	}
	cur.do("close", latch)
}
