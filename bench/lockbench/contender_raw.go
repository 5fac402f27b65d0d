package lockbench

import (
	"context"
	"errors"
	"strconv"

	"github.com/dlock-go/dlock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// rawReleaseSrc is the classic compare-and-delete.
const rawReleaseSrc = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`

var errRawNotHeld = errors.New("raw: lock not held at release")

// rawContender is the floor: SET key token NX PX ttl, retried in a tight
// spin with no sleep while the key is taken, and release by EVALSHA of a
// compare-and-delete script loaded once per client.
func rawContender() Contender {
	return Contender{
		Name:        "raw-goredis",
		Floor:       true,
		Open:        openRaw,
		LuaInternal: []string{"get", "del"},
		Config: "go-redis v9 default options; `SET key token NX PX 10000`, spinning with no sleep while taken; " +
			"release `EVALSHA` compare-and-delete (SCRIPT LOAD once per client); 16-byte random token as dlock's.",
	}
}

type rawClient struct {
	rdb   *redis.Client
	sha   string
	ttlMs string
}

func openRaw(addr string) (Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	sha, err := rdb.ScriptLoad(context.Background(), rawReleaseSrc).Result()
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &rawClient{rdb: rdb, sha: sha, ttlMs: strconv.FormatInt(LockTTL.Milliseconds(), 10)}, nil
}

func (c *rawClient) Lock(ctx context.Context, key string) (Release, error) {
	token := dlock.NewToken()
	for {
		err := c.rdb.Do(ctx, "SET", key, token, "NX", "PX", c.ttlMs).Err()
		if err == nil {
			break
		}
		if err != redis.Nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		n, err := c.rdb.EvalSha(ctx, c.sha, []string{key}, token).Int64()
		if err == nil && n != 1 {
			err = errRawNotHeld
		}
		return err
	}, nil
}

func (c *rawClient) Close() error { return c.rdb.Close() }

// rawRueidisContender is the floor's two commands over rueidis (one
// auto-pipelined connection, DisableCache as dlock-rueidis): what dlock
// over rueidis is measured against in S2, where the transport decides.
func rawRueidisContender() Contender {
	return Contender{
		Name:        "raw-rueidis",
		Open:        openRawRueidis,
		LuaInternal: []string{"get", "del"},
		Config: "raw-goredis's commands over rueidis (`DisableCache: true`, other options default, as dlock-rueidis): " +
			"`SET key token NX PX 10000` spinning while taken, release `EVALSHA` compare-and-delete (rueidis.Lua).",
	}
}

type rawRueidisClient struct {
	c   rueidis.Client
	rel *rueidis.Lua
	ttl int64
}

func openRawRueidis(addr string) (Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &rawRueidisClient{c: c, rel: rueidis.NewLuaScript(rawReleaseSrc), ttl: LockTTL.Milliseconds()}, nil
}

func (c *rawRueidisClient) Lock(ctx context.Context, key string) (Release, error) {
	token := dlock.NewToken()
	for {
		err := c.c.Do(ctx, c.c.B().Set().Key(key).Value(token).Nx().PxMilliseconds(c.ttl).Build()).Error()
		if err == nil {
			break
		}
		if !rueidis.IsRedisNil(err) {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		n, err := c.rel.Exec(ctx, c.c, []string{key}, []string{token}).AsInt64()
		if err == nil && n != 1 {
			err = errRawNotHeld
		}
		return err
	}, nil
}

func (c *rawRueidisClient) Close() error { c.c.Close(); return nil }
