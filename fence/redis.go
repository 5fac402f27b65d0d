package fence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/transport"
)

//go:embed lua/write.lua
var writeSrc string

var writeScript = transport.NewScript("write", writeSrc)

// A Redis guards a user's own keys on a Redis deployment (standalone,
// Sentinel or Cluster), which need not be the one the lock lives on. It
// keeps the highest fence written to each key in a key beside it, on the
// same Cluster slot (see RedisKey), and writes by a Lua script that
// refuses a stale fence and writes otherwise, in one step. A Redis is
// safe for concurrent use.
type Redis struct {
	conn transport.Conn
	config
}

// NewRedis returns a guard for the keys of the deployment that conn
// reaches: goredisconn.New(rdb) for a go-redis client, rueidisconn.New(c)
// for a rueidis one, as for redislock. Of the options, it takes
// WithObserver.
func NewRedis(conn redislock.Conn, opts ...Option) *Redis {
	return &Redis{conn: conn, config: newConfig(opts)}
}

// RedisKey returns the key in which the guard keeps the fence of key:
// "dlock:guard:" followed by key if key has a hash tag ({tag}), else by
// key in braces, so that both hash to the same Cluster slot. (The
// prefix is not redislock's "dlock:fence:", so that guarded keys and
// locks may share a deployment.) The fence key stays after key is
// deleted or expires, so that a stale holder cannot write it again. It returns an
// error for a key that has no hash tag but contains a '}', which no key
// of the same slot can be built for: give such a key a hash tag.
func RedisKey(key string) (string, error) {
	if key == "" {
		return "", badInput{"fence: empty Redis key"}
	}
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return "dlock:guard:" + key, nil
		}
	}
	if strings.ContainsRune(key, '}') {
		return "", badInput{fmt.Sprintf("fence: Redis key %q has a '}' but no {hash tag}; give it one, such as {%s}", key, strings.ReplaceAll(key, "}", ""))}
	}
	return "dlock:guard:{" + key + "}", nil
}

// Set sets key to value, as SET does (removing any expiry), unless a
// higher fence has written to key: then it writes nothing and returns a
// *StaleError.
func (r *Redis) Set(ctx context.Context, key string, fence uint64, value string) error {
	return r.write(ctx, key, fence, "set", value)
}

// HSet sets fields of the hash key, as HSET does, unless a higher fence
// has written to key: then it writes nothing and returns a *StaleError.
// fieldsAndValues alternate field and value: "name", "x", "qty", "3".
func (r *Redis) HSet(ctx context.Context, key string, fence uint64, fieldsAndValues ...string) error {
	if len(fieldsAndValues) == 0 || len(fieldsAndValues)%2 != 0 {
		return fmt.Errorf("fence: HSet of %q needs field, value pairs; got %d strings", key, len(fieldsAndValues))
	}
	return r.write(ctx, key, fence, "hset", fieldsAndValues...)
}

// Check records fence for key without writing key, unless a higher one is
// recorded: then it returns a *StaleError. Writes made after it are not
// guarded by it (another holder may write in between); it is for a
// resource outside Redis whose fence is kept in Redis.
func (r *Redis) Check(ctx context.Context, key string, fence uint64) error {
	return r.write(ctx, key, fence, "advance")
}

func (r *Redis) write(ctx context.Context, key string, fence uint64, op string, args ...string) error {
	if err := checkInput(key, fence, maxResource); err != nil {
		return err
	}
	fk, err := RedisKey(key)
	if err != nil {
		return err
	}
	keys := []string{fk, key}
	if op == "advance" {
		keys = keys[:1]
	}
	err = r.eval(ctx, key, fence, op, keys, append([]string{strconv.FormatUint(fence, 10), op}, args...))
	observe(r.observer, "Redis", key, fence, err)
	return err
}

// eval runs the write script and interprets its reply.
func (r *Redis) eval(ctx context.Context, resource string, fence uint64, op string, keys, args []string) error {
	what := "fenced write to"
	if op == "advance" {
		what = "fence check of"
	}
	results := make([]transport.Result, 1)
	r.conn.Eval(ctx, []transport.Call{{Script: writeScript, Keys: keys, Args: args}}, results)
	res := results[0]
	if res.Err != nil {
		return fmt.Errorf("fence: %s Redis key %q: %w", what, resource, res.Err)
	}
	reply, ok := res.Val.([]any)
	if ok && len(reply) == 1 && reply[0] == int64(1) {
		return nil
	}
	if ok && len(reply) == 2 && reply[0] == int64(0) {
		if s, _ := reply[1].(string); s != "" {
			newest, err := strconv.ParseUint(s, 10, 64)
			if err == nil {
				return &StaleError{Resource: resource, Fence: fence, Newest: newest}
			}
		}
	}
	return fmt.Errorf("fence: %s Redis key %q: unexpected reply %v", what, resource, res.Val)
}

// Store returns the guard as a Store for Handler: Advance records the
// fence of a resource in the key "dlock:guard:{resource}" (resource in a
// hash tag, or as it is if it has one).
func (r *Redis) Store() Store { return redisStore{r} }

type redisStore struct{ r *Redis }

func (s redisStore) Advance(ctx context.Context, resource string, fence uint64) error {
	return s.r.Check(ctx, resource, fence)
}
