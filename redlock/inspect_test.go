package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// Inspect reports a lock held on a majority as a mutex with its owner,
// a key on a minority as unknown with each node's view, and a free name
// as free; ForceUnlock deletes the lock everywhere and the holder learns
// at its next renewal; with a node down, Inspect still answers from the
// majority and ForceUnlock says which node it could not reach.
func TestIntegrationInspectAndForceUnlock(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, addrsOf(servers), goRedis, redlock.WithRestartWindow(10*time.Second))
	if info, err := c.Inspect(ctx, "inspected"); err != nil || info.Kind != dlock.KindFree || info.Held() {
		t.Fatalf("Inspect of a free name = %+v, %v; want free", info, err)
	}
	lease, err := c.NewMutex("inspected", redlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Inspect(ctx, "inspected")
	if err != nil {
		t.Fatal(err)
	}
	want := dlock.Holder{Owner: lease.Token(), Mode: dlock.ModeExclusive, Holds: 1}
	if info.Kind != dlock.KindMutex || len(info.Holders) != 1 || info.Holders[0] != want ||
		info.Fence < lease.Fence() || info.TTL <= 0 || info.TTL > 10*time.Second {
		t.Fatalf("Inspect of a held lock = %+v; want a mutex held by %+v, fence at least %d", info, want, lease.Fence())
	}

	// A minority's key: delete it from two nodes of three. Lock returns
	// on a majority, so under load the third node's SET may still be on
	// its way: wait until every node has the key first.
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range servers {
		for {
			out, err := s.Do("EXISTS", lockKey("inspected"))
			if err == nil && out == "1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lock key never reached %s (EXISTS %q, %v)", s.Addr(), out, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, s := range servers[:2] {
		if _, err := s.Do("DEL", lockKey("inspected")); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := c.Inspect(ctx, "inspected"); err != nil || info.Kind != dlock.KindUnknown || info.Held() || info.Detail == "" {
		t.Errorf("Inspect with the key on 1 of 3 nodes = %+v, %v; want unknown with each node's view", info, err)
	}
	if ok, err := c.ForceUnlock(ctx, "inspected"); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	if err := lease.Refresh(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Refresh after ForceUnlock = %v; want ErrNotHeld", err)
	}
	if ok, err := c.ForceUnlock(ctx, "inspected"); ok || err != nil {
		t.Errorf("ForceUnlock of a free name = %v, %v; want false, nil", ok, err)
	}

	servers[2].Kill()
	if info, err := c.Inspect(ctx, "inspected"); err != nil || info.Kind != dlock.KindFree {
		t.Errorf("Inspect with 2 of 3 nodes up = %+v, %v; want free", info, err)
	}
	var ne *redlock.NodeError
	if _, err := c.ForceUnlock(ctx, "inspected"); !errors.As(err, &ne) || ne.Node != servers[2].Addr() {
		t.Errorf("ForceUnlock with a node down = %v; want a NodeError for %s", err, servers[2].Addr())
	}
	servers[1].Kill()
	if _, err := c.Inspect(ctx, "inspected"); !errors.As(err, &ne) {
		t.Errorf("Inspect with 1 of 3 nodes up = %v; want an error with the NodeErrors", err)
	}
	if _, err := c.Inspect(ctx, ""); err == nil {
		t.Error("Inspect of an empty name succeeded")
	}
}
