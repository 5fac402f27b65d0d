package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// A Redlock node that restarts without persistence while dlock holds the
// bare key on a bare majority (the third node was held by another owner
// at the grant). dlock's restart detection keeps dlock's own clients off:
// the restarted node abstains for the restart window, so a second dlock
// Mutex is refused. redsync knows nothing of it: the restarted node and
// the third one grant it the key while dlock's lease is valid, a second
// holder, until dlock's next renewal finds the key gone from its majority
// and ends its lease. This test pins that limit: with other libraries on
// the same masters, a node must keep its data across restarts
// (appendfsync always) or stay down for a TTL, as the Redlock algorithm
// itself requires of them.
func TestIntegrationRedlockRestartRedsync(t *testing.T) {
	testenv.SkipIfShort(t, "needs redis-server")
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	addrs := make([]string, len(servers))
	conns := make([]redisconn.Conn, len(servers))
	pools := make([]redsyncredis.Pool, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	rdbs := make([]*redis.Client, len(servers))
	for i, a := range addrs {
		rdbs[i] = newRDB(t, a)
		conns[i] = goredisconn.New(newRDB(t, a))
		pools[i] = redsyncgoredis.NewPool(newRDB(t, a))
	}
	age(t, rdbs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "orders:restart"
	const lease = 9 * time.Second // renewed every 3s
	c := redlock.New(conns, redlock.WithNodeTimeout(500*time.Millisecond))
	t.Cleanup(func() { c.Close() })

	// Another owner holds the third node for a moment: dlock's grant
	// stands on the first two.
	if err := rdbs[2].Set(ctx, key, "someone", 700*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.NewMutex(key, redlock.WithBareKey(), redlock.WithTTL(lease)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	granted := time.Now()
	if err := servers[1].Restart(); err != nil { // empty: no persistence
		t.Fatal(err)
	}
	for rdbs[2].Exists(ctx, key).Val() != 0 { // the other owner's key expires
		time.Sleep(10 * time.Millisecond)
	}

	// dlock's own clients: the restarted node abstains.
	c2 := redlock.New([]redisconn.Conn{goredisconn.New(newRDB(t, addrs[0])), goredisconn.New(newRDB(t, addrs[1])), goredisconn.New(newRDB(t, addrs[2]))},
		redlock.WithNodeTimeout(500*time.Millisecond))
	t.Cleanup(func() { c2.Close() })
	if l2, err := c2.NewMutex(key, redlock.WithBareKey(), redlock.WithTTL(lease)).TryLock(ctx); err == nil {
		l2.Release(ctx)
		t.Fatalf("a second dlock Mutex took the key while the first holds it (restart detection)")
	} else if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatal(err)
	}

	// redsync: the restarted node votes at once.
	m := redsync.New(pools...).NewMutex(key, redsync.WithExpiry(lease), redsync.WithTries(1))
	before := valuesOn(rdbs...)(ctx, key)
	rerr := m.TryLockContext(ctx)
	overlap := rerr == nil
	took := time.Now()
	if overlap {
		defer m.UnlockContext(ctx)
	}
	if since := took.Sub(granted); !overlap || since > lease/3 || l.Err() != nil {
		// A slow machine: dlock's renewal came first. Nothing to show.
		t.Logf("no overlap (redsync: %v, %v after the grant, with the nodes holding %q; dlock's lease: %v)", rerr, since, before, l.Err())
		return
	}
	t.Logf("redsync took the key %v after dlock's grant, %v before dlock's Until: two holders",
		took.Sub(granted).Round(time.Millisecond), time.Until(l.Until()).Round(time.Millisecond))
	// dlock's next renewal ends its lease.
	select {
	case <-l.Done():
		t.Logf("dlock's lease ended %v after redsync took the key: %v", time.Since(took).Round(time.Millisecond), l.Err())
	case <-time.After(lease/3 + 2*time.Second):
		t.Fatalf("dlock's lease still open %v after redsync took its key on a majority", lease/3+2*time.Second)
	}
	if !errors.Is(l.Err(), dlock.ErrLost) {
		t.Fatalf("dlock's lease ended with %v; want ErrLost", l.Err())
	}
}
