// Package goredisconn connects redislock to a go-redis v9 client: a
// *redis.Client, *redis.ClusterClient, a Sentinel failover client, or any
// redis.UniversalClient.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	locks := redislock.New(goredisconn.New(rdb))
//
// Set ContextTimeoutEnabled: without it, go-redis bounds a command by its
// ReadTimeout (3s by default) rather than by the context's deadline, so a
// Lock whose context runs out while the server is slow returns only when
// the reply (or the read timeout) comes. It then still reports
// dlock.ErrNotObtained and releases whatever the late reply granted.
package goredisconn

import (
	"context"
	"errors"
	"reflect"
	"strings"

	"github.com/dlock-go/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client that dlock uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient satisfy it.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

type conn struct{ c Client }

// New returns a redislock.Conn that talks through c. A nil c (or a nil
// *redis.Client inside the interface) gives a Conn whose every call fails
// with an error saying so.
func New(c Client) redislock.Conn {
	if c == nil {
		return nilConn{}
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
		return nilConn{}
	}
	return conn{c}
}

func (c conn) Eval(ctx context.Context, calls []redislock.Call, results []redislock.Result) {
	if len(calls) == 1 && calls[0].WaitReplicas > 0 {
		results[0] = c.evalWait(ctx, calls[0])
		return
	}
	if len(calls) == 1 { // the common case: no pipeline
		call := calls[0]
		cmd := c.c.EvalSha(ctx, call.Script.SHA1, call.Keys, args(call.Args)...)
		if isNoScript(cmd.Err()) {
			cmd = c.c.Eval(ctx, call.Script.Src, call.Keys, args(call.Args)...)
		}
		results[0] = result(cmd)
		return
	}
	cmds := c.pipeline(ctx, calls, func(p redis.Pipeliner, call redislock.Call) *redis.Cmd {
		return p.EvalSha(ctx, call.Script.SHA1, call.Keys, args(call.Args)...)
	})
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
		results[i] = result(cmd)
	}
	if len(retry) == 0 {
		return
	}
	again := make([]redislock.Call, len(retry))
	for j, i := range retry {
		again[j] = calls[i]
	}
	cmds = c.pipeline(ctx, again, func(p redis.Pipeliner, call redislock.Call) *redis.Cmd {
		return p.Eval(ctx, call.Script.Src, call.Keys, args(call.Args)...)
	})
	for j, i := range retry {
		results[i] = result(cmds[j])
	}
}

// evalWait runs one script and WAIT in one pipeline, hence on one
// connection, so that WAIT counts the script's writes. On a Cluster the
// pipeline goes to the master of the script's first key, since WAIT has no
// key of its own to route by.
func (c conn) evalWait(ctx context.Context, call redislock.Call) redislock.Result {
	pipeliner := c.c.Pipeline
	if cc, ok := c.c.(*redis.ClusterClient); ok && len(call.Keys) > 0 {
		node, err := cc.MasterForKey(ctx, call.Keys[0])
		if err != nil {
			return redislock.Result{Err: err, Replicas: -1}
		}
		pipeliner = node.Pipeline
	}
	for _, byHash := range []bool{true, false} {
		p := pipeliner()
		var cmd *redis.Cmd
		if byHash {
			cmd = p.EvalSha(ctx, call.Script.SHA1, call.Keys, args(call.Args)...)
		} else {
			cmd = p.Eval(ctx, call.Script.Src, call.Keys, args(call.Args)...)
		}
		wait := p.Do(ctx, "wait", call.WaitReplicas, redislock.WaitMillis(call.WaitTimeout))
		p.Exec(ctx)
		if byHash && isNoScript(cmd.Err()) {
			continue
		}
		r := result(cmd)
		r.Replicas = -1
		if n, err := wait.Int64(); err == nil {
			r.Replicas = n
		}
		return r
	}
	panic("unreachable")
}

func (c conn) pipeline(ctx context.Context, calls []redislock.Call, add func(redis.Pipeliner, redislock.Call) *redis.Cmd) []*redis.Cmd {
	p := c.c.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, call := range calls {
		cmds[i] = add(p, call)
	}
	p.Exec(ctx) // per-command errors are in cmds
	return cmds
}

func args(a []string) []any {
	out := make([]any, len(a))
	for i, s := range a {
		out[i] = s
	}
	return out
}

func result(cmd *redis.Cmd) redislock.Result {
	v, err := cmd.Result()
	switch {
	case err == nil:
		return redislock.Result{Val: v}
	case errors.Is(err, redis.Nil):
		return redislock.Result{}
	}
	var re redis.Error
	if errors.As(err, &re) {
		return redislock.Result{Err: &redislock.ReplyError{Msg: re.Error()}}
	}
	return redislock.Result{Err: err}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

type nilConn struct{}

var errNil = errors.New("goredisconn: New was given a nil client")

func (nilConn) Eval(_ context.Context, calls []redislock.Call, results []redislock.Result) {
	for i := range calls {
		results[i] = redislock.Result{Err: errNil}
	}
}

func (nilConn) Listen(func(string)) redislock.Listener { return nilListener{} }

type nilListener struct{}

func (nilListener) Subscribe(context.Context, string) error   { return errNil }
func (nilListener) Unsubscribe(context.Context, string) error { return errNil }
func (nilListener) Close() error                              { return nil }

// Addr returns the server address of a single-node client, and "" for
// Cluster, Ring and Sentinel clients.
func (c conn) Addr() string {
	if rc, ok := c.c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return ""
}
