package fence

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/dlock-go/dlock/redisconn"
)

//go:embed lua/write.lua
var writeSrc string

var writeScript = redisconn.NewScript("write", writeSrc)

// A Redis guards a user's own keys on a Redis deployment (standalone,
// Sentinel or Cluster), which need not be the one the lock lives on. It
// keeps the highest fence written to each key in a key beside it, on the
// same Cluster slot (see RedisKey), and writes by a Lua script that
// refuses a stale fence and writes otherwise, in one step. A Redis is
// safe for concurrent use.
//
// A fence the server forgets is a stale write let through: a server that
// restarts without the fences it kept accepts any fence for a key until
// a current holder writes again. So a Redis guard works only with a
// server that writes every write to disk before it answers: appendonly
// yes and appendfsync always, with no-appendfsync-on-rewrite no (its
// default; yes skips the fsync while the server rewrites its AOF or saves
// a snapshot). (With appendfsync everysec a crash of the machine loses up
// to two seconds of writes; with RDB snapshots alone, everything since
// the last one; without persistence, everything.) Nor may the server
// evict keys without a TTL, as the allkeys- policies of maxmemory-policy
// do. The guard reads the server's configuration with
// CONFIG GET on its first call, once, and if the server does not persist
// every write or may evict its fences, or the guard cannot tell (the
// Conn has no Command method, or the server refuses CONFIG GET), every
// call returns an error matching ErrNotPersistent, and writes nothing.
// AcceptFenceLoss lifts this.
//
// The configuration is read from the node that answers CONFIG GET: in a
// Cluster, one of the masters, and the others are taken to be alike. It
// is read once: a change made later is not seen, such as a CONFIG SET,
// or a restart with another configuration (which undoes a CONFIG SET
// not written to the configuration file), or a failover to a replica
// configured otherwise. A failover to a replica that had not received
// the last writes loses them as a restart would: the guard does not wait
// for replicas.
type Redis struct {
	conn redisconn.Conn
	config

	// persistent is held while the server's configuration is read: a
	// channel, so that a caller waiting for it can give up when its ctx
	// ends. The fields below it are guarded by it.
	persistent chan struct{}
	checked    bool        // the configuration has been read, or cannot be
	verdict    error       // nil if the server persists every write
	passed     atomic.Bool // checked, with a nil verdict: a shortcut
}

// ErrNotPersistent is the error, matched with errors.Is, of every call of
// a Store of an SQL guard on a MySQL or MariaDB server that does not flush
// every commit to disk (see SQL.Store), and of every call of a Redis guard
// whose server does not write every write to disk before
// it answers (appendonly yes, appendfsync always,
// no-appendfsync-on-rewrite no), or may evict keys without a TTL
// (maxmemory-policy allkeys-…), or whose configuration the guard cannot
// read, unless the guard was made with AcceptFenceLoss. Such a server can
// forget fences, and then accepts a stale write.
var ErrNotPersistent = errors.New("fence: the server may forget fences")

// NewRedis returns a guard for the keys of the deployment that conn
// reaches: goredisconn.New(rdb) for a go-redis client, rueidisconn.New(c)
// for a rueidis one, as for redislock. Of the options, it takes
// WithObserver, AcceptFenceLoss and WithMaxJump. It makes no request: the server's
// persistence is read by the guard's first call.
func NewRedis(conn redisconn.Conn, opts ...Option) *Redis {
	return &Redis{conn: conn, config: newConfig(opts), persistent: make(chan struct{}, 1)}
}

// RedisKey returns the key in which the guard keeps the fence of key:
// "dlock:guard:" followed by key if key has a hash tag ({tag}), else by
// key in braces, so that both hash to the same Cluster slot. (The
// prefix is not redislock's "dlock:fence:", so that guarded keys and
// locks may share a deployment.) The fence key stays after key is
// deleted or expires, so that a stale holder cannot write it again.
//
// A key that is all one hash tag, such as "{x}", would so share the
// fence key of the key in it, "x"; it has "dlock:guard:dlock:guard:{x}"
// instead, and, until its first write there, the fence that earlier
// versions kept for it in "dlock:guard:{x}" counts as its newest. No two
// keys share a fence key.
//
// It returns an error for a key that has no hash tag but contains a '}',
// which no key of the same slot can be built for: give such a key a hash
// tag; and for a key that itself begins with "dlock:guard:", which names
// a fence key.
func RedisKey(key string) (string, error) {
	fk, _, err := guardKeys(key)
	return fk, err
}

// guardKeys returns the fence key of key, as RedisKey does, and the key
// in which earlier versions kept its fence if that was another.
func guardKeys(key string) (fk, legacy string, err error) {
	if key == "" {
		return "", "", badInput{"fence: empty Redis key"}
	}
	if strings.HasPrefix(key, guardPrefix) {
		return "", "", badInput{fmt.Sprintf("fence: Redis key %q begins with %q, the prefix of the keys that hold the guard's fences: writing it could overwrite another key's fence", key, guardPrefix)}
	}
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			if open == 0 && end+2 == len(key) {
				// "{x}": guardPrefix+key is the fence key of "x". Keys
				// beginning with guardPrefix are refused, so no other
				// key's fence key begins with it twice.
				return guardPrefix + guardPrefix + key, guardPrefix + key, nil
			}
			return guardPrefix + key, "", nil
		}
	}
	if strings.ContainsRune(key, '}') {
		return "", "", badInput{fmt.Sprintf("fence: Redis key %q has a '}' but no {hash tag}; give it one, such as {%s}", key, strings.ReplaceAll(key, "}", ""))}
	}
	return guardPrefix + "{" + key + "}", "", nil
}

// guardPrefix begins the keys that hold the fences of a Redis guard.
const guardPrefix = "dlock:guard:"

// ownPrefix begins every key that dlock writes: its locks' and its
// guards'. Set and HSet refuse to write such a key.
const ownPrefix = "dlock:"

// Set sets key to value, as SET does (removing any expiry), unless a
// higher fence has written to key: then it writes nothing and returns a
// *StaleError. A key that begins with "dlock:", as every key of dlock's
// locks and guards does, is refused.
func (r *Redis) Set(ctx context.Context, key string, fence uint64, value string) error {
	return r.write(ctx, key, fence, "set", value)
}

// HSet sets fields of the hash key, as HSET does, unless a higher fence
// has written to key: then it writes nothing and returns a *StaleError.
// A key that begins with "dlock:" is refused, as by Set.
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
	fk, legacy, err := guardKeys(key)
	if err != nil {
		return err
	}
	if op != "advance" && strings.HasPrefix(key, ownPrefix) {
		return badInput{fmt.Sprintf("fence: Redis key %q begins with %q, as the keys of dlock's locks and guards do: writing it could change a lock's fence counter or another key's fence; give the key another name", key, ownPrefix)}
	}
	if err := r.checkPersistent(ctx); err != nil {
		return err
	}
	keys := []string{fk, cmp.Or(legacy, fk), key}
	if op == "advance" {
		keys = keys[:2]
	}
	bound := ""
	if r.maxJump > 0 {
		bound = strconv.FormatUint(r.maxJump, 10)
	}
	err = r.eval(ctx, key, fence, op, keys, append([]string{strconv.FormatUint(fence, 10), op, bound}, args...))
	observe(r.observer, "Redis", key, fence, err)
	return err
}

// eval runs the write script and interprets its reply.
func (r *Redis) eval(ctx context.Context, resource string, fence uint64, op string, keys, args []string) error {
	what := "fenced write to"
	if op == "advance" {
		what = "fence check of"
	}
	results := make([]redisconn.Result, 1)
	r.conn.Eval(ctx, []redisconn.Call{{Script: writeScript, Keys: keys, Args: args}}, results)
	res := results[0]
	if res.Err != nil {
		return fmt.Errorf("fence: %s Redis key %q: %w", what, resource, res.Err)
	}
	reply, ok := res.Val.([]any)
	if ok && len(reply) == 1 && reply[0] == int64(1) {
		return nil
	}
	if ok && len(reply) == 2 && (reply[0] == int64(0) || reply[0] == int64(2)) {
		if s, _ := reply[1].(string); s != "" {
			newest, err := strconv.ParseUint(s, 10, 64)
			if err == nil && reply[0] == int64(2) {
				return &TooHighError{Resource: resource, Fence: fence, Newest: newest, MaxJump: r.maxJump}
			}
			if err == nil {
				return &StaleError{Resource: resource, Fence: fence, Newest: newest}
			}
		}
	}
	return fmt.Errorf("fence: %s Redis key %q: unexpected reply %v", what, resource, res.Val)
}

// Store returns the guard as a Store for Handler: Advance records the
// fence of a resource in the key RedisKey(resource) returns,
// "dlock:guard:{resource}" for a resource without a hash tag.
func (r *Redis) Store() Store { return redisStore{r} }

type redisStore struct{ r *Redis }

func (s redisStore) Advance(ctx context.Context, resource string, fence uint64) error {
	return s.r.Check(ctx, resource, fence)
}

// A commander is a Conn that can also send a plain command, as the Conns
// of goredisconn and rueidisconn can.
type commander interface {
	Command(ctx context.Context, args ...string) redisconn.Result
}

// checkPersistent returns nil if the server persists every write, or the
// guard accepts that it may not; else an error matching
// ErrNotPersistent, or the error of a failed attempt to tell. It reads the
// server's configuration once: a failure to reach the server is not
// remembered, a refusal of CONFIG GET is.
func (r *Redis) checkPersistent(ctx context.Context) error {
	if r.acceptLoss || r.passed.Load() {
		return nil
	}
	select {
	case r.persistent <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("fence: reading the Redis server's persistence: %w", ctx.Err())
	}
	defer func() { <-r.persistent }()
	if r.checked {
		return r.verdict
	}
	verdict, err := r.readPersistence(ctx)
	if err != nil {
		return err
	}
	r.checked, r.verdict = true, verdict
	r.passed.Store(verdict == nil)
	return verdict
}

// readPersistence reads the server's configuration and returns its
// verdict: nil if the server persists every write, an error matching
// ErrNotPersistent if it does not or if the guard cannot tell. The error
// is that of a failure to reach the server, which decided nothing.
func (r *Redis) readPersistence(ctx context.Context) (verdict, err error) {
	const fix = "set appendonly yes and appendfsync always in the server's configuration file (CONFIG SET alone lasts until the server restarts), or give NewRedis fence.AcceptFenceLoss() to accept that a restart of the server lets a stale write through"
	cmd, ok := r.conn.(commander)
	if !ok {
		return fmt.Errorf("%w, as far as the guard can tell: its Conn, a %T, cannot send CONFIG GET (it has no Command method, as goredisconn's and rueidisconn's have); %s",
			ErrNotPersistent, r.conn, fix), nil
	}
	values := map[string]string{}
	for _, param := range []string{"appendonly", "appendfsync", "no-appendfsync-on-rewrite", "maxmemory", "maxmemory-policy"} {
		res := cmd.Command(ctx, "CONFIG", "GET", param)
		if res.Err != nil {
			var re *redisconn.ReplyError
			if msg := res.Err.Error(); errors.As(res.Err, &re) && (strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand")) {
				return fmt.Errorf("%w, as far as the guard can tell: the server refused CONFIG GET %s (%v); allow CONFIG GET for this user, and %s",
					ErrNotPersistent, param, res.Err, fix), nil
			}
			return nil, fmt.Errorf("fence: reading the Redis server's persistence (CONFIG GET %s): %w", param, res.Err)
		}
		v, err := configValue(res.Val, param)
		if err != nil {
			return nil, fmt.Errorf("fence: reading the Redis server's persistence: %w", err)
		}
		values[param] = v
	}
	if values["appendonly"] != "yes" || values["appendfsync"] != "always" {
		return fmt.Errorf("%w: it does not write every write to disk before it answers (appendonly %s, appendfsync %s), so a restart can lose fences and let a stale write through; %s",
			ErrNotPersistent, values["appendonly"], values["appendfsync"], fix), nil
	}
	// While a child process rewrites the AOF or saves a snapshot, this
	// setting skips the fsync of appendfsync always: writes are then
	// acknowledged as with appendfsync no.
	if values["no-appendfsync-on-rewrite"] != "no" {
		return fmt.Errorf("%w: it skips the fsync while it rewrites its AOF or saves a snapshot (no-appendfsync-on-rewrite %s), so a crash of its machine then can lose fences and let a stale write through; "+
			"set no-appendfsync-on-rewrite no, or give NewRedis fence.AcceptFenceLoss() to accept the risk",
			ErrNotPersistent, values["no-appendfsync-on-rewrite"]), nil
	}
	// A key without a TTL, as a fence's is, is evicted only by the
	// allkeys policies.
	if values["maxmemory"] != "0" && strings.HasPrefix(values["maxmemory-policy"], "allkeys-") {
		return fmt.Errorf("%w: it may evict any key, the guard's fences among them (maxmemory %s, maxmemory-policy %s), and then let a stale write through; "+
			"set maxmemory-policy noeviction (or a volatile- one, which evicts only keys with a TTL), or give NewRedis fence.AcceptFenceLoss() to accept the risk",
			ErrNotPersistent, values["maxmemory"], values["maxmemory-policy"]), nil
	}
	return nil, nil
}

// configValue returns the value of param in a CONFIG GET reply: a
// [name, value] array (RESP2) or a map (RESP3).
func configValue(v any, param string) (string, error) {
	switch r := v.(type) {
	case []any:
		for j := 0; j+1 < len(r); j += 2 {
			if k, _ := r[j].(string); strings.EqualFold(k, param) {
				if s, ok := r[j+1].(string); ok {
					return s, nil
				}
			}
		}
	case map[any]any:
		if s, ok := r[param].(string); ok {
			return s, nil
		}
	case map[string]any:
		if s, ok := r[param].(string); ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("CONFIG GET %s: unexpected reply %T %v", param, v, v)
}
