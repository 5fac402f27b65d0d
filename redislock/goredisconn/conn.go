// Package goredisconn connects redislock, redlock and fence.NewRedis to a
// go-redis v9 client: a *redis.Client, *redis.ClusterClient, a Sentinel
// failover client, or any redis.UniversalClient.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	locks := redislock.New(goredisconn.New(rdb))
//
// Set ContextTimeoutEnabled: without it, go-redis bounds a command by its
// ReadTimeout (5s by default) rather than by the context's deadline, so a
// Lock whose context runs out while the server is slow returns only when
// the reply (or the read timeout) comes, and redislock.AttemptTimeout does
// not bound a call to a server that does not answer. It then still reports
// dlock.ErrNotObtained and releases whatever the late reply granted.
//
// A *redis.ClusterClient is told to reload its map of the slots whenever a
// call cannot reach its node or gets no answer from it, since go-redis
// reloads it by itself only for commands it may send again (dlock's
// scripts are sent once) or every ClusterStateReloadInterval: so Lock and
// the renewals follow a failover to the promoted replica.
//
// The pub/sub connection on which release notices arrive is watched: when
// it has carried nothing for a second while channels are subscribed, it is
// sent a PING, and when that is not answered within another second (a
// connection a firewall dropped, open but carrying nothing), it is closed
// and every channel subscribed again on a new one.
//
// # Calls from many goroutines
//
// Script calls that goroutines make at the same time on one server go out
// together, as one go-redis pipeline: a call that finds no other in flight
// is sent at once, by itself, and calls that arrive while one is in flight
// are sent together as soon as it is answered (there is no timer, so a
// single goroutine waits for no one). Many calls then share one write and
// one read on the client and on the server, as with rueidis's automatic
// pipelining. A *redis.ClusterClient batches per master, so that a slow
// node holds up only the calls to it; a *redis.Client (standalone or
// Sentinel) has one batch in flight at a time; other clients (a Ring, or
// a Client of your own) send each call by itself. Hooks see a batch as a
// pipeline. A caller whose context ends while its call waits returns at
// once: a call not yet sent is dropped, and one already sent is treated
// as a call whose reply was lost (dlock gives back what it may have taken).
package goredisconn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client that dlock uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient satisfy it.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

type conn struct {
	c Client

	one   *batcher // the batcher of a *redis.Client; nil otherwise
	nodes sync.Map // of a *redis.ClusterClient: master address -> *batcher
}

// New returns a Conn that talks through c, for redislock.New, redlock.New
// or fence.NewRedis. A nil c (or a nil
// *redis.Client inside the interface) gives a Conn whose every call fails
// with an error saying so.
func New(c Client) redisconn.Conn {
	if c == nil {
		return nilConn{}
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
		return nilConn{}
	}
	cn := &conn{c: c}
	if _, ok := c.(*redis.Client); ok {
		cn.one = &batcher{conn: cn}
	}
	return cn
}

// Eval runs a single call with those that other goroutines make at the
// same time on the same server, in one pipeline (see batcher), and several
// calls (a renewal batch) in a pipeline of their own.
func (c *conn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	switch {
	case len(calls) == 1 && calls[0].WaitReplicas > 0:
		results[0] = c.evalWait(ctx, calls[0])
	case len(calls) == 1:
		if b := c.batcherFor(ctx, calls[0]); b != nil {
			results[0] = b.eval(ctx, calls[0])
		} else {
			results[0] = c.evalOne(ctx, calls[0])
		}
	default:
		c.evalMany(ctx, calls, results)
	}
	c.lostNode(results)
}

// lostNode has a *redis.ClusterClient reload its map of the slots when a
// call could not reach its node or got no answer from it: go-redis does so
// itself only when it may send the command again, which dlock's scripts
// forbid (see sentOnce), and otherwise every ClusterStateReloadInterval
// (60s), so calls kept going to a master that a failover had replaced (a
// Lock waited 40s, its whole context, after the slot's master was killed
// and its replica promoted in 3s). The reload runs in the background, one
// at a time.
func (c *conn) lostNode(results []redisconn.Result) {
	cc, ok := c.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, r := range results {
		var re *redisconn.ReplyError
		if r.Err != nil && !errors.As(r.Err, &re) && !errors.Is(r.Err, context.Canceled) && !errors.Is(r.Err, redisconn.ErrUnusable) {
			cc.ReloadState(context.Background())
			return
		}
	}
}

// evalOne runs one call by itself.
func (c *conn) evalOne(ctx context.Context, call redisconn.Call) redisconn.Result {
	cmd := script(ctx, "evalsha", call.Script.SHA1, call)
	c.c.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		cmd = script(ctx, "eval", call.Script.Src, call)
		c.c.Process(ctx, cmd)
	}
	return result(cmd.Cmd)
}

// evalMany runs calls in one pipeline, and those that failed with NOSCRIPT
// again by EVAL in a second.
func (c *conn) evalMany(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	cmds := c.pipeline(ctx, calls, "evalsha")
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
		results[i] = result(cmd.Cmd)
	}
	if len(retry) == 0 {
		return
	}
	again := make([]redisconn.Call, len(retry))
	for j, i := range retry {
		again[j] = calls[i]
	}
	cmds = c.pipeline(ctx, again, "eval")
	for j, i := range retry {
		results[i] = result(cmds[j].Cmd)
	}
}

// evalWait runs one script and WAIT in one pipeline, hence on one
// connection, so that WAIT counts the script's writes. On a Cluster the
// pipeline goes to the master of the script's first key, since WAIT has no
// key of its own to route by; a redirect (the slot moved, or is moving)
// comes back as the script's error and makes the client reload its map of
// the slots, for the next attempt.
func (c *conn) evalWait(ctx context.Context, call redisconn.Call) redisconn.Result {
	pipeliner := c.c.Pipeline
	cc, cluster := c.c.(*redis.ClusterClient)
	if cluster && len(call.Keys) > 0 {
		node, err := cc.MasterForKey(ctx, call.Keys[0])
		if err != nil {
			return redisconn.Result{Err: err, Replicas: -1}
		}
		pipeliner = node.Pipeline
	}
	for _, byHash := range []bool{true, false} {
		p := pipeliner()
		cmd := script(ctx, "eval", call.Script.Src, call)
		if byHash {
			cmd = script(ctx, "evalsha", call.Script.SHA1, call)
		}
		p.Process(ctx, cmd)
		wait := p.Do(ctx, "wait", call.WaitReplicas, redisconn.WaitMillis(call.WaitTimeout))
		p.Exec(ctx)
		if byHash && isNoScript(cmd.Err()) {
			continue
		}
		if err := cmd.Err(); cluster && err != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
			cc.ReloadState(ctx)
		}
		r := result(cmd.Cmd)
		r.Replicas = -1
		if n, err := wait.Int64(); err == nil {
			r.Replicas = n
		}
		return r
	}
	panic("unreachable")
}

// pipeline sends every call as verb ("evalsha" or "eval") in one
// pipeline.
func (c *conn) pipeline(ctx context.Context, calls []redisconn.Call, verb string) []sentOnce {
	p := c.c.Pipeline()
	cmds := make([]sentOnce, len(calls))
	for i, call := range calls {
		body := call.Script.SHA1
		if verb == "eval" {
			body = call.Script.Src
		}
		cmds[i] = script(ctx, verb, body, call)
		p.Process(ctx, cmds[i])
	}
	p.Exec(ctx) // per-command errors are in cmds
	return cmds
}

// A sentOnce is a script call that go-redis must not send again. go-redis
// re-sends a command whose reply did not come in time (its read timeout,
// a reset connection) up to MaxRetries times, and the server may then run
// it twice: once as the reply was late, once more on the retry. dlock's
// scripts change state, and dlock retries what it can itself, knowing
// which calls may be repeated, so every script call is marked NoRetry,
// which go-redis honours for single commands and pipelines alike (a
// command that never left keeps its right to be sent).
type sentOnce struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the command again.
func (sentOnce) NoRetry() bool { return true }

// script returns the call as verb ("evalsha" with the digest as body, or
// "eval" with the source), keys and arguments in the order go-redis's
// cluster routing expects.
func script(ctx context.Context, verb, body string, call redisconn.Call) sentOnce {
	a := make([]any, 0, 3+len(call.Keys)+len(call.Args))
	a = append(a, verb, body, len(call.Keys))
	for _, k := range call.Keys {
		a = append(a, k)
	}
	for _, s := range call.Args {
		a = append(a, s)
	}
	return sentOnce{redis.NewCmd(ctx, a...)}
}

func result(cmd *redis.Cmd) redisconn.Result {
	v, err := cmd.Result()
	switch {
	case err == nil:
		return redisconn.Result{Val: v}
	case errors.Is(err, redis.Nil):
		return redisconn.Result{}
	}
	var re redis.Error
	if errors.As(err, &re) {
		return redisconn.Result{Err: &redisconn.ReplyError{Msg: re.Error()}}
	}
	return redisconn.Result{Err: closed(err)}
}

// closed marks the error of a call on a closed client, which waiting
// cannot heal, with redisconn.ErrUnusable.
func closed(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", redisconn.ErrUnusable, err)
	}
	return err
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

type nilConn struct{}

var errNil = fmt.Errorf("goredisconn: New was given a nil client (%w)", redisconn.ErrUnusable)

func (nilConn) Eval(_ context.Context, calls []redisconn.Call, results []redisconn.Result) {
	for i := range calls {
		results[i] = redisconn.Result{Err: errNil}
	}
}

func (nilConn) Listen(func(string)) redisconn.Listener { return nilListener{} }

type nilListener struct{}

func (nilListener) Subscribe(context.Context, string) error   { return errNil }
func (nilListener) Unsubscribe(context.Context, string) error { return errNil }
func (nilListener) Close() error                              { return nil }

// Addr returns the server address of a single-node client, and "" for
// Cluster, Ring and Sentinel clients.
func (c *conn) Addr() string {
	if rc, ok := c.c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return ""
}
