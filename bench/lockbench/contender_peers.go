package lockbench

import (
	"context"
	"errors"
	"sync"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// bsmRetry is the wait facility of bsm/redislock, which has none by
// default (NoRetry): LinearBackoff(100ms), its documented example.
var bsmOptions = &bsm.Options{RetryStrategy: bsm.LinearBackoff(100 * time.Millisecond)}

func bsmContender() Contender {
	return Contender{
		Name:        "bsm/redislock",
		Open:        openBsm,
		LuaInternal: []string{"set", "getrange", "get", "pexpire", "del", "pttl"},
		Config: "github.com/bsm/redislock " + moduleVersion("github.com/bsm/redislock") + ", go-redis v9 default options; " +
			"`Obtain(ctx, key, 10s, opts)` / `Release`. It has no default wait (NoRetry), so blocking uses its documented " +
			"example `LinearBackoff(100ms)` (unlimited; the run's deadline ends it).",
	}
}

type bsmClient struct {
	rdb *redis.Client
	c   *bsm.Client
}

func openBsm(addr string) (Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &bsmClient{rdb: rdb, c: bsm.New(rdb)}, nil
}

func (b *bsmClient) Lock(ctx context.Context, key string) (Release, error) {
	l, err := b.c.Obtain(ctx, key, LockTTL, bsmOptions)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (b *bsmClient) Close() error { return b.rdb.Close() }

func redsyncContender() Contender {
	return Contender{
		Name:        "redsync",
		Open:        openRedsync,
		LuaInternal: []string{"get", "del", "pexpire"},
		Config: "github.com/go-redsync/redsync/v4 " + moduleVersion("github.com/go-redsync/redsync/v4") + " with its goredis/v9 pool " +
			"(go-redis default options); `NewMutex(key)` with all defaults (expiry 8s, 32 tries, retry delay uniform " +
			"50–250ms), `LockContext` / `UnlockContext`. A Lock that gives up after 32 tries is retried.",
	}
}

type redsyncClient struct {
	rdb *redis.Client
	rs  *redsync.Redsync
}

func openRedsync(addr string) (Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return &redsyncClient{rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb))}, nil
}

var errRedsyncNotHeld = errors.New("redsync: unlock reported the lock not held")

func (r *redsyncClient) Lock(ctx context.Context, key string) (Release, error) {
	m := r.rs.NewMutex(key)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errRedsyncNotHeld
		}
		return err
	}, nil
}

func (r *redsyncClient) Close() error { return r.rdb.Close() }

func rueidislockContender() Contender {
	return Contender{
		Name:        "rueidislock",
		Open:        openRueidislock,
		LuaInternal: []string{"set", "get", "pexpireat", "del"},
		Config: "github.com/redis/rueidis/rueidislock " + moduleVersion("github.com/redis/rueidis") + ", its README's single-instance " +
			"configuration: `KeyMajority: 1, NoLoopTracking: true`, client-side caching on (its wake-up mechanism), other " +
			"options default (KeyValidity 5s, auto-extend); `WithContext` to lock, its cancel func to release.",
	}
}

type rueidislockClient struct{ l rueidislock.Locker }

func openRueidislock(addr string) (Client, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, err
	}
	return &rueidislockClient{l: l}, nil
}

func (r *rueidislockClient) Lock(ctx context.Context, key string) (Release, error) {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { cancel(); return nil }, nil
}

func (r *rueidislockClient) Close() error { r.l.Close(); return nil }

// rueidislockSharedContender is rueidislock with one Locker shared by
// every client the benchmark opens against one address: the setup in
// which rueidislock wakes one waiter per release (its waiters of a name
// share the Locker's client-side cache invalidation).
func rueidislockSharedContender() Contender {
	c := rueidislockContender()
	c.Name = "rueidislock-shared"
	c.Open = openSharedRueidislock
	c.Config = "as rueidislock, but the 8 S3 clients share one Locker (one rueidis client); S1 and S2 are unchanged (one client)."
	return c
}

var sharedLockers struct {
	sync.Mutex
	by map[string]*sharedLocker
}

type sharedLocker struct {
	l    rueidislock.Locker
	refs int
}

// openSharedRueidislock returns a Client on the Locker shared by every
// open client of addr; the last Close closes it.
func openSharedRueidislock(addr string) (Client, error) {
	sharedLockers.Lock()
	defer sharedLockers.Unlock()
	if sharedLockers.by == nil {
		sharedLockers.by = map[string]*sharedLocker{}
	}
	s := sharedLockers.by[addr]
	if s == nil {
		c, err := openRueidislock(addr)
		if err != nil {
			return nil, err
		}
		s = &sharedLocker{l: c.(*rueidislockClient).l}
		sharedLockers.by[addr] = s
	}
	s.refs++
	return &sharedRueidislockClient{rueidislockClient{l: s.l}, addr}, nil
}

type sharedRueidislockClient struct {
	rueidislockClient
	addr string
}

func (c *sharedRueidislockClient) Close() error {
	sharedLockers.Lock()
	defer sharedLockers.Unlock()
	s := sharedLockers.by[c.addr]
	if s.refs--; s.refs == 0 {
		delete(sharedLockers.by, c.addr)
		s.l.Close()
	}
	return nil
}
