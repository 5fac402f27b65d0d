package lockbench

import (
	"context"

	"github.com/dlock-go/dlock"
)

// Issue 4 contenders: FairMutex (S5), RWMutex against a plain Mutex (S6).
// They run only in S5, S6 and R2, whatever -contenders says.

// dlockIssue4LuaInternal are the commands dlock's fair, read-write and
// reentrant scripts run inside Redis (besides dlockLuaInternal's): dlock
// never sends them itself.
var dlockIssue4LuaInternal = append([]string{"lindex", "lpop", "rpush", "lrem", "llen", "exists",
	"zadd", "zrem", "zscore", "zrange", "zremrangebyscore", "zcard", "zcount",
	"hexists", "hget", "hset", "hincrby", "hgetall", "decr"}, dlockLuaInternal...)

func dlockFairGoRedis() Contender {
	return Contender{
		Name:           "dlock-fair-goredis",
		DlockTransport: "goredis",
		Open: func(addr string) (Client, error) {
			d, err := openDlock(addr, "goredis", nil)
			if err != nil {
				return nil, err
			}
			return fairClient{d}, nil
		},
		LuaInternal: dlockIssue4LuaInternal,
		Config: "redislock.FairMutex over goredisconn (go-redis v9 default options); `WithTTL(10s)`, renewal on, " +
			"`Lock` with the default retry (strict FIFO queue; a release wakes the head waiter alone on its own channel). One FairMutex per Lock call.",
	}
}

// S5Contenders are S5's: the FairMutex and the plain Mutex it is compared with.
func S5Contenders() []Contender { return []Contender{dlockGoRedis(), dlockFairGoRedis()} }

type fairClient struct{ *dlockClient }

func (f fairClient) Lock(ctx context.Context, key string) (Release, error) {
	l, err := f.c.NewFairMutex(key, f.opts...).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// An rwClient takes a read or a write lock on key.
type rwClient interface {
	LockRW(ctx context.Context, key string, read bool) (Release, error)
	Close() error
}

// S6Contenders are S6's: RWMutex, and a plain Mutex taken for every
// operation, read or write.
func S6Contenders() []Contender {
	return []Contender{
		{Name: "dlock-mutex-goredis", DlockTransport: "goredis", LuaInternal: dlockIssue4LuaInternal,
			Open: func(addr string) (Client, error) { return openRW(addr, false) },
			Config: "redislock.Mutex over goredisconn, `WithTTL(10s)`, renewal on, default retry; " +
				"S6 baseline: the same Mutex.Lock for reads and writes."},
		{Name: "dlock-rw-goredis", DlockTransport: "goredis", LuaInternal: dlockIssue4LuaInternal,
			Open: func(addr string) (Client, error) { return openRW(addr, true) },
			Config: "redislock.RWMutex over goredisconn, `WithTTL(10s)`, renewal on, default retry; " +
				"reads by `Reader().Lock`, writes by `Writer().Lock` (a waiting writer keeps new readers out)."},
	}
}

type rwDlock struct {
	*dlockClient
	rw bool
}

func openRW(addr string, rw bool) (Client, error) {
	d, err := openDlock(addr, "goredis", nil)
	if err != nil {
		return nil, err
	}
	return rwDlock{d, rw}, nil
}

func (d rwDlock) LockRW(ctx context.Context, key string, read bool) (Release, error) {
	var lk dlock.Locker
	switch {
	case !d.rw:
		lk = d.c.NewMutex(key, d.opts...)
	case read:
		lk = d.c.NewRWMutex(key, d.opts...).Reader()
	default:
		lk = d.c.NewRWMutex(key, d.opts...).Writer()
	}
	l, err := lk.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// R2Name is R2's row: dlock's ReentrantMutex over goredisconn.
const R2Name = "dlock-reentrant-goredis"

func r2Contender() Contender {
	return Contender{Name: R2Name, DlockTransport: "goredis",
		Config: "redislock.ReentrantMutex over goredisconn wrapped in a counting Conn, `WithTTL(10s)`, renewal on; " +
			"the uncontended baseline is a plain Mutex's TryLock on a second, unwrapped client."}
}

// issue4Contenders are the contenders of S5, S6 and R2.
func issue4Contenders() []Contender {
	return append(append(S5Contenders(), S6Contenders()...), r2Contender())
}
