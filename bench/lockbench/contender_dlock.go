package lockbench

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// dlockLuaInternal are the commands dlock's acquire, release and refresh
// scripts run inside Redis (incr: the acquire script's fence; zadd, zpopmin, zrem: the
// line of waiting clients).
var dlockLuaInternal = []string{"set", "time", "get", "type", "pttl", "del", "publish", "pexpire", "incr", "zadd", "zpopmin", "zrem"}

func dlockGoRedis() Contender {
	return Contender{
		Name:           "dlock-goredis",
		DlockTransport: "goredis",
		Open:           func(addr string) (Client, error) { return openDlockClient(addr, "goredis") },
		LuaInternal:    dlockLuaInternal,
		Config: "redislock.Mutex over goredisconn (go-redis v9 default options); `WithTTL(10s)`, renewal on (default), " +
			"`Lock` with the default retry (release notice by pub/sub + exponential 8–512ms jittered poll). One Mutex per key.",
	}
}

func dlockRueidis() Contender {
	return Contender{
		Name:           "dlock-rueidis",
		DlockTransport: "rueidis",
		Open:           func(addr string) (Client, error) { return openDlockClient(addr, "rueidis") },
		LuaInternal:    dlockLuaInternal,
		Config:         "as dlock-goredis, over rueidisconn; rueidis client with `DisableCache: true`, other options default.",
	}
}

// dlockClient is one redislock.Client on its own Redis client.
type dlockClient struct {
	c         *redislock.Client
	closeRdb  func()
	opts      []redislock.Option
	transport string
}

// dialDlock opens the Redis client of a transport and returns its Conn.
func dialDlock(addr, transport string) (redislock.Conn, func(), error) {
	switch transport {
	case "goredis":
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredisconn.New(rdb), func() { rdb.Close() }, nil
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			return nil, nil, err
		}
		return rueidisconn.New(c), c.Close, nil
	}
	return nil, nil, errors.New("unknown dlock transport " + transport)
}

// openDlock opens a dlock client; wrap, if not nil, wraps its Conn.
func openDlock(addr, transport string, wrap func(redislock.Conn) redislock.Conn, opts ...redislock.Option) (*dlockClient, error) {
	conn, closeRdb, err := dialDlock(addr, transport)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		conn = wrap(conn)
	}
	if len(opts) == 0 {
		opts = []redislock.Option{redislock.WithTTL(LockTTL)}
	}
	return &dlockClient{c: redislock.New(conn), closeRdb: closeRdb, opts: opts, transport: transport}, nil
}

func openDlockClient(addr, transport string) (Client, error) {
	d, err := openDlock(addr, transport, func(c redislock.Conn) redislock.Conn { return &pollConn{Conn: c} })
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *dlockClient) Lock(ctx context.Context, key string) (Release, error) {
	l, err := d.c.NewMutex(key, d.opts...).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (d *dlockClient) Close() error {
	err := d.c.Close()
	d.closeRdb()
	return err
}
