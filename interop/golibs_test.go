package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	dredislock "github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// otherRetry is how often the other libraries' waiting Lock tries again
// in these tests (their defaults: bsm/redislock none, redsync a random
// 50-250ms).
const otherRetry = 10 * time.Millisecond

func newRDB(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// dlockSingle returns a maker of dlock peers on one server, each on a
// Client of its own.
func dlockSingle(addr, key string, rdb *redis.Client) func(t *testing.T) peer {
	return func(t *testing.T) peer {
		c := dredislock.New(goredisconn.New(newRDB(t, addr)))
		t.Cleanup(func() { c.Close() })
		return &dlockPeer{l: c.NewMutex(key, dredislock.WithBareKey(), dredislock.WithTTL(ttl)), rdb: rdb, key: key}
	}
}

// dlockQuorum returns a maker of dlock Redlock peers over addrs.
func dlockQuorum(addrs []string, key string, rdb *redis.Client) func(t *testing.T) peer {
	return func(t *testing.T) peer {
		conns := make([]redisconn.Conn, len(addrs))
		for i, a := range addrs {
			conns[i] = goredisconn.New(newRDB(t, a))
		}
		c := redlock.New(conns, redlock.WithNodeTimeout(500*time.Millisecond))
		t.Cleanup(func() { c.Close() })
		return &dlockPeer{l: c.NewMutex(key, redlock.WithBareKey(), redlock.WithTTL(ttl)), rdb: rdb, key: key}
	}
}

func tokenOf(p peer) string { return p.(*dlockPeer).held.Token() }

func valuesOn(rdbs ...*redis.Client) func(ctx context.Context, key string) []string {
	return func(ctx context.Context, key string) []string {
		v := make([]string, len(rdbs))
		for i, r := range rdbs {
			v[i], _ = r.Get(ctx, key).Result()
		}
		return v
	}
}

// bsmPeer is a peer on bsm/redislock.
type bsmPeer struct {
	c    *redislock.Client
	rdb  *redis.Client
	key  string
	held *redislock.Lock
}

func (p *bsmPeer) obtain(ctx context.Context, retry redislock.RetryStrategy) (bool, error) {
	l, err := p.c.Obtain(ctx, p.key, ttl, &redislock.Options{RetryStrategy: retry})
	if errors.Is(err, redislock.ErrNotObtained) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	p.held = l
	return true, nil
}

func (p *bsmPeer) try(ctx context.Context) (bool, error) { return p.obtain(ctx, redislock.NoRetry()) }

func (p *bsmPeer) lock(ctx context.Context) (time.Time, error) {
	// Obtain waits at most until ctx's deadline, or the TTL without one.
	ok, err := p.obtain(ctx, redislock.LinearBackoff(otherRetry))
	if err == nil && !ok {
		err = errors.New("bsm/redislock: not obtained")
	}
	return time.Now(), err
}

func (p *bsmPeer) unlock(ctx context.Context) (time.Time, error) {
	err := p.held.Release(ctx)
	p.held = nil
	return time.Now(), err
}

func (p *bsmPeer) count(ctx context.Context, n int) (int, error) {
	return countWith(ctx, p.rdb, p.key, n, func(ctx context.Context) error {
		_, err := p.lock(ctx)
		return err
	}, func(ctx context.Context) error {
		_, err := p.unlock(ctx)
		return err
	})
}

func (p *bsmPeer) close() {}

// redsyncPeer is a peer on redsync, over one pool or several (Redlock).
type redsyncPeer struct {
	rs      *redsync.Redsync
	rdb     *redis.Client
	key     string
	held    *redsync.Mutex
	waiting bool
}

func (p *redsyncPeer) try(ctx context.Context) (bool, error) {
	m := p.rs.NewMutex(p.key, redsync.WithExpiry(ttl), redsync.WithTries(1))
	err := m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	p.held = m
	return true, nil
}

func (p *redsyncPeer) lock(ctx context.Context) (time.Time, error) {
	m := p.rs.NewMutex(p.key, redsync.WithExpiry(ttl), redsync.WithTries(1<<30), redsync.WithRetryDelay(otherRetry))
	if err := m.LockContext(ctx); err != nil {
		return time.Time{}, err
	}
	p.held = m
	return time.Now(), nil
}

func (p *redsyncPeer) unlock(ctx context.Context) (time.Time, error) {
	ok, err := p.held.UnlockContext(ctx)
	p.held = nil
	if err == nil && !ok {
		err = errors.New("redsync: Unlock found the lock not held")
	}
	return time.Now(), err
}

func (p *redsyncPeer) count(ctx context.Context, n int) (int, error) {
	return countWith(ctx, p.rdb, p.key, n, func(ctx context.Context) error {
		_, err := p.lock(ctx)
		return err
	}, func(ctx context.Context) error {
		_, err := p.unlock(ctx)
		return err
	})
}

func (p *redsyncPeer) close() {}

func TestIntegrationBSMRedislock(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := newRDB(t, srv.Addr())
	key := "orders:42:bsm"
	runPair(t, pair{key: key, rdb: rdb,
		newDlock: dlockSingle(srv.Addr(), key, rdb),
		newOther: func(t *testing.T) peer {
			return &bsmPeer{c: redislock.New(newRDB(t, srv.Addr())), rdb: rdb, key: key}
		},
		token:  tokenOf,
		values: func(ctx context.Context) []string { return valuesOn(rdb)(ctx, key) },
	})
	controls(t, rdb, srv.Addr(), key)
}

func TestIntegrationRedsyncSingle(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := newRDB(t, srv.Addr())
	key := "{orders:42}:redsync"
	runPair(t, pair{key: key, rdb: rdb,
		newDlock: dlockSingle(srv.Addr(), key, rdb),
		newOther: func(t *testing.T) peer {
			return &redsyncPeer{rs: redsync.New(redsyncgoredis.NewPool(newRDB(t, srv.Addr()))), rdb: rdb, key: key}
		},
		token:  tokenOf,
		values: func(ctx context.Context) []string { return valuesOn(rdb)(ctx, key) },
	})
}

// Redlock over three masters: redsync's and dlock's redlock.
func TestIntegrationRedsyncRedlock(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	addrs := make([]string, len(servers))
	nodes := make([]*redis.Client, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
		nodes[i] = newRDB(t, s.Addr())
	}
	age(t, nodes)
	rdb := nodes[0] // the counter lives on the first node
	key := "orders:42:redlock"
	runPair(t, pair{key: key, rdb: rdb,
		newDlock: dlockQuorum(addrs, key, rdb),
		newOther: func(t *testing.T) peer {
			pools := make([]redsyncredis.Pool, len(addrs))
			for i, a := range addrs {
				pools[i] = redsyncgoredis.NewPool(newRDB(t, a))
			}
			return &redsyncPeer{rs: redsync.New(pools...), rdb: rdb, key: key}
		},
		token:  tokenOf,
		values: func(ctx context.Context) []string { return valuesOn(nodes...)(ctx, key) },
	})
}

// age makes the nodes look long-lived to dlock's restart detection, as
// those of a deployment that has run a while (a fresh node abstains for
// the restart window): the epoch hash quorum_acquire.lua keeps says that
// the node's data and server began an hour ago.
func age(t *testing.T, nodes []*redis.Client) {
	ctx := context.Background()
	created := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
	for _, n := range nodes {
		saved, err := n.LastSave(ctx).Result()
		if err == nil {
			err = n.HSet(ctx, "dlock:epoch", "created", created, "boot", created, "seen", saved).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// controls: the checks above would catch a wrong key. While bsm/redislock
// holds key, dlock's own layout (no WithBareKey) on the same name is not
// refused, nor is the bare layout on a neighbouring key; so a dlock that
// locked another key than the bare one would fail TryLockBothWays.
func controls(t *testing.T, rdb *redis.Client, addr, key string) {
	ctx := context.Background()
	l, err := redislock.Obtain(ctx, rdb, key, ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	c := dredislock.New(goredisconn.New(newRDB(t, addr)))
	defer c.Close()
	for _, m := range []dlock.Locker{c.NewMutex(key), c.NewMutex(key+"x", dredislock.WithBareKey()), c.NewMutex("x"+key, dredislock.WithBareKey())} {
		dl, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("%s while bsm/redislock holds %q: TryLock: %v; want it obtained", m.Name(), key, err)
		}
		dl.Release(ctx)
	}
}
