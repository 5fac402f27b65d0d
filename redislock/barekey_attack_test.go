package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// Attacks on WithBareKey: other writers of the bare key, the fence across
// them and a restart, and WithBareKey beside dlock's own layout on the
// same name. One server for all.
func TestIntegrationBareKeyAttacks(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	admin := d.admin(t)
	const ttl = 3 * time.Second
	horizon := ttl/3 + time.Second // the next renewal, and slack for load

	// A foreign write to the key dlock holds (an operator's DEL, another
	// library's SET after the key was freed, a PEXPIRE that lets it
	// expire): the lease ends at the next renewal, with ErrLost, and
	// dlock's release never deletes the foreign value.
	t.Run("ForeignWrites", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		c := newClient(t, d, goRedis)
		for _, w := range []struct {
			name string
			do   func(key string) error
		}{
			{"DEL", func(key string) error { return admin.Del(ctx, key).Err() }},
			{"SET", func(key string) error { return admin.Set(ctx, key, "foreign", time.Minute).Err() }},
			{"PEXPIRE", func(key string) error { return admin.PExpire(ctx, key, time.Millisecond).Err() }},
		} {
			key := "attack:foreign:" + w.name
			l, err := c.NewMutex(key, redislock.WithBareKey(), redislock.WithTTL(ttl)).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.do(key); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			select {
			case <-l.Done():
			case <-time.After(horizon):
				t.Fatalf("%s: Done still open %v after a foreign %s of the key", key, horizon, w.name)
			}
			if !errors.Is(l.Err(), dlock.ErrLost) {
				t.Errorf("%s: Err %v after a foreign %s; want ErrLost", key, l.Err(), w.name)
			}
			t.Logf("%s: Done %v after the foreign %s", key, time.Since(start).Round(time.Millisecond), w.name)
			l.Release(ctx)
			if w.name == "SET" {
				if v, _ := admin.Get(ctx, key).Result(); v != "foreign" {
					t.Errorf("%s: the foreign value became %q after dlock's release", key, v)
				}
				admin.Del(ctx, key)
			}
		}
	})

	// Fences strictly increase across dlock holders of the key, with a
	// foreign holder between them and across a restart of the server
	// without persistence (the counter is gone then).
	t.Run("FenceAcrossForeignAndRestart", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		c := newClient(t, d, goRedis)
		key := "attack:fence"
		m := c.NewMutex(key, redislock.WithBareKey(), redislock.WithTTL(ttl))
		take := func() uint64 {
			t.Helper()
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			return l.Fence()
		}
		f1 := take()
		if err := admin.Set(ctx, key, "foreign", 100*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		f2 := take() // waits for the foreign key to expire
		if f2 <= f1 {
			t.Fatalf("fence %d after a foreign holder, after %d; want larger", f2, f1)
		}
		if err := d.servers[0].Restart(); err != nil {
			t.Fatal(err)
		}
		if n, _ := admin.Exists(ctx, rediskeys.Bare(key).Fence).Result(); n != 0 {
			t.Fatalf("the counter survived a restart without persistence")
		}
		var f3 uint64
		for deadline := time.Now().Add(10 * time.Second); ; {
			l, err := m.TryLock(ctx)
			if err == nil {
				f3 = l.Fence()
				l.Release(ctx)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("TryLock after the restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if f3 <= f2 {
			t.Fatalf("fence %d after a restart without persistence, after %d; want larger", f3, f2)
		}
	})

	// A bare Mutex and dlock's own Mutex on the same name are different
	// locks (different keys): holding one does not make the other
	// "reentrant" under the holder's Context, which the migration
	// (docs/interop-redis.md) needs when code takes one inside the other.
	t.Run("OtherLayoutUnderHoldersContext", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		c := newClient(t, d, goRedis)
		const key = "attack:nested"
		for _, order := range [][2]*redislock.Mutex{
			{c.NewMutex(key, redislock.WithBareKey()), c.NewMutex(key)},
			{c.NewMutex(key), c.NewMutex(key, redislock.WithBareKey())},
		} {
			outer, err := order[0].Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := order[1].TryLock(outer.Context())
			if err != nil {
				t.Errorf("the other layout on %q under the holder's Context: %v; want it taken (another key)", key, err)
			} else {
				inner.Release(ctx)
			}
			// The same layout is still refused, as it would wait for itself.
			if _, err := order[0].TryLock(outer.Context()); !errors.Is(err, redislock.ErrNotReentrant) {
				t.Errorf("the same layout under the holder's Context: %v; want ErrNotReentrant", err)
			}
			outer.Release(ctx)
		}
	})
}

// Two MultiLocks over the bare key and dlock's layout of one name, given
// in opposite orders (two services written apart, during the migration
// docs/interop-redis.md describes): MultiLock takes its locks in the
// order of their names so that MultiLocks sharing locks cannot deadlock,
// and the two locks share a name. Both must get through.
func TestIntegrationBareKeyMultiLockOrder(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	const key = "orders:order"
	c1, c2 := newClient(t, d, goRedis), newClient(t, d, goRedis)
	ml1 := redislock.NewMultiLock(c1.NewMutex(key, redislock.WithBareKey()), c1.NewMutex(key))
	ml2 := redislock.NewMultiLock(c2.NewMutex(key), c2.NewMutex(key, redislock.WithBareKey()))
	for round := range 20 {
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, ml := range []*redislock.MultiLock{ml1, ml2} {
			go func() {
				<-start
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				l, err := ml.Lock(rctx)
				if err == nil {
					err = l.Release(ctx)
				}
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v (the two MultiLocks took the two locks in opposite orders: a deadlock)", round, err)
			}
		}
	}
}

// A bare key whose slot moves to another master while dlock holds it, and
// while a dlock waiter waits for it: no foreign SET NX gets in during the
// move, the holder's renewals follow the key, and the waiter is granted
// once the slot has moved, with a fence above those drawn before (the
// counter is in the key's slot and moves with it).
func TestIntegrationBareKeyClusterSlotMigration(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	locks := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { locks.Close() })
	ctx := timeout(t, time.Minute)
	const key = "{mig}:bare"
	slot := int(rediskeys.ClusterSlot(key))
	m := locks.NewMutex(key, redislock.WithBareKey(), redislock.WithTTL(time.Second))
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := l.Fence()
	from, err := c.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	moved := make(chan error, 1)
	go func() { moved <- c.MigrateSlot(slot, (from+1)%3, 300*time.Millisecond) }()
	foreign := 0
	for done := false; !done; {
		select {
		case err := <-moved:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-time.After(20 * time.Millisecond):
			if ok, _ := rdb.SetNX(ctx, key, "foreign", time.Second).Result(); ok {
				foreign++
			}
		}
	}
	if foreign > 0 || l.Err() != nil {
		t.Fatalf("while the slot moved: %d foreign SET NX took the key; dlock's lease: %v", foreign, l.Err())
	}
	if v, _ := rdb.Get(ctx, key).Result(); v != l.Token() {
		t.Fatalf("after the move the key holds %q; want dlock's token", v)
	}
	// Held across at least one renewal on the new master.
	time.Sleep(700 * time.Millisecond)
	if l.Err() != nil {
		t.Fatalf("lease after the move: %v", l.Err())
	}
	// A waiter while the slot moves back.
	go func() { moved <- c.MigrateSlot(slot, from, 300*time.Millisecond) }()
	time.AfterFunc(200*time.Millisecond, func() { l.Release(ctx) })
	l2, err := locks.NewMutex(key, redislock.WithBareKey()).Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock while the slot moved back: %v", err)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= before {
		t.Errorf("fence %d after the moves, %d before; want it higher", l2.Fence(), before)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Errorf("the key is left after the release")
	}
}

// WithReplicas with WithBareKey: a grant that was acknowledged survives
// a failover to the replica, where a foreign SET NX is refused; a grant no
// replica acknowledged (the promoted replica has none) is given back: the
// bare key is free again for another library at once.
func TestIntegrationBareKeyReplicas(t *testing.T) {
	t.Parallel()
	master, replica, _ := replicated(t)
	ctx := timeout(t, 30*time.Second)
	const key = "orders:replicated"
	opts := []redislock.Option{redislock.WithBareKey(), redislock.WithTTL(3 * time.Second), redislock.WithReplicas(1, 300*time.Millisecond)}
	l, err := clientAt(t, master.Addr()).NewMutex(key, opts...).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failover(t, master, replica)
	admin := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { admin.Close() })
	if ok, err := admin.SetNX(ctx, key, "foreign", time.Minute).Result(); ok || err != nil {
		t.Fatalf("foreign SET NX on the promoted replica: %v, %v; want refused", ok, err)
	}
	if l.Err() != nil {
		t.Fatalf("lease after the failover: %v", l.Err())
	}
	other := key + ":unacknowledged"
	if l, err := clientAt(t, replica.Addr()).NewMutex(other, opts...).TryLock(ctx); err == nil {
		l.Release(ctx)
		t.Fatal("TryLock on a master without replicas: granted; want refused")
	} else if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock on a master without replicas: %v; want ErrNotObtained", err)
	}
	for deadline := time.Now().Add(5 * time.Second); admin.Exists(ctx, other).Val() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the unacknowledged grant's key %q is still there", other)
		}
	}
	if ok, err := admin.SetNX(ctx, other, "foreign", time.Second).Result(); !ok || err != nil {
		t.Fatalf("foreign SET NX after the unacknowledged grant: %v, %v; want it taken", ok, err)
	}
}
