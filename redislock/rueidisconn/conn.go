// Package rueidisconn connects redislock, redlock and fence.NewRedis to a
// rueidis client, whose automatic pipelining sends the calls of many
// goroutines that take locks at once together (goredisconn does the same
// for go-redis). Standalone, Sentinel and Cluster clients all work. A call
// returns by its context's end, even while it waits for a connection that
// another call is making. The pub/sub connection is sent a PING every
// second while channels are subscribed, and replaced when one is not
// answered within a second (rueidis's own check takes its
// ConnWriteTimeout, ten seconds by default).
//
//	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	locks := redislock.New(rueidisconn.New(c))
package rueidisconn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/rueidis"
)

type conn struct{ c rueidis.Client }

// New returns a Conn that talks through c, for redislock.New, redlock.New
// or fence.NewRedis. A nil c gives a Conn
// whose every call fails with an error saying so.
func New(c rueidis.Client) redisconn.Conn {
	if c == nil {
		return nilConn{}
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
		return nilConn{}
	}
	return conn{c}
}

func (c conn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	bounded(ctx, results, func(results []redisconn.Result) { c.eval1(ctx, calls, results) })
}

func (c conn) eval1(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	if len(calls) == 1 && calls[0].WaitReplicas > 0 {
		results[0] = c.evalWait(ctx, calls[0])
		return
	}
	if len(calls) == 1 {
		call := calls[0]
		r := c.do(ctx, func() rueidis.Completed { return c.evalsha(call) })
		if isNoScript(r.Error()) {
			r = c.do(ctx, func() rueidis.Completed { return c.eval(call) })
		}
		results[0] = result(r)
		return
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	if again := c.doMulti(ctx, calls, results, all, c.evalsha); len(again) > 0 {
		c.doMulti(ctx, calls, results, again, c.eval)
	}
}

// dialTries bounds the tries of a call whose connection's dial ended
// with another call's context.
const dialTries = 3

// cutByAnother reports whether err is a dial that a context's end cut
// short while the call's own ctx is alive: rueidis dials a connection
// once for all the calls waiting for it, with the context of the first,
// and gives them all that dial's error. Such a call was not sent, and can
// go again. (Any other context error may come after the call was sent:
// rueidis may judge a deadline passed before ctx's own timer fires.)
func cutByAnother(ctx context.Context, err error) bool {
	if err == nil || !redisscript.Unsent(err) || ctx.Err() != nil {
		return false
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// do runs the command build returns, again (built anew: rueidis recycles
// a command once run) if another call's context cut its dial short.
func (c conn) do(ctx context.Context, build func() rueidis.Completed) rueidis.RedisResult {
	for try := 1; ; try++ {
		r := c.c.Do(ctx, build())
		if try == dialTries || !cutByAnother(ctx, r.Error()) {
			return r
		}
	}
}

// doMulti runs build(calls[i]) for each i in idx in one DoMulti and sets
// results[i], running again those whose dial another call's context cut
// short. It returns the indexes whose reply was NOSCRIPT.
func (c conn) doMulti(ctx context.Context, calls []redisconn.Call, results []redisconn.Result, idx []int, build func(redisconn.Call) rueidis.Completed) (noScript []int) {
	for try := 1; len(idx) > 0; try++ {
		cmds := make(rueidis.Commands, len(idx))
		for j, i := range idx {
			cmds[j] = build(calls[i])
		}
		var again []int
		for j, r := range c.c.DoMulti(ctx, cmds...) {
			i := idx[j]
			switch err := r.Error(); {
			case try < dialTries && cutByAnother(ctx, err):
				again = append(again, i)
			case isNoScript(err):
				noScript = append(noScript, i)
				fallthrough
			default:
				results[i] = result(r)
			}
		}
		idx = again
	}
	return noScript
}

// evalWait runs one script and WAIT on one dedicated connection, so that
// WAIT counts the script's writes.
func (c conn) evalWait(ctx context.Context, call redisconn.Call) redisconn.Result {
	var r redisconn.Result
	err := c.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		wait := dc.B().Wait().Numreplicas(int64(call.WaitReplicas)).Timeout(redisconn.WaitMillis(call.WaitTimeout)).Build()
		rs := dc.DoMulti(ctx, c.evalsha(call), wait)
		if isNoScript(rs[0].Error()) {
			rs = dc.DoMulti(ctx, c.eval(call), dc.B().Wait().Numreplicas(int64(call.WaitReplicas)).Timeout(redisconn.WaitMillis(call.WaitTimeout)).Build())
		}
		r = result(rs[0])
		r.Replicas = -1
		if n, err := rs[1].AsInt64(); err == nil {
			r.Replicas = n
		}
		return nil
	})
	if err != nil {
		return redisconn.Result{Err: err, Replicas: -1}
	}
	return r
}

func (c conn) evalsha(call redisconn.Call) rueidis.Completed {
	return c.c.B().Evalsha().Sha1(call.Script.SHA1).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build()
}

func (c conn) eval(call redisconn.Call) rueidis.Completed {
	return c.c.B().Eval().Script(call.Script.Src).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build()
}

func result(r rueidis.RedisResult) redisconn.Result {
	if err := r.Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			return redisconn.Result{}
		}
		if re, ok := rueidis.IsRedisErr(err); ok {
			return redisconn.Result{Err: &redisconn.ReplyError{Msg: re.Error()}}
		}
		return redisconn.Result{Err: err}
	}
	msg, _ := r.ToMessage()
	if n, err := msg.AsInt64(); err == nil && msg.IsInt64() {
		return redisconn.Result{Val: n}
	}
	v, err := msg.ToAny()
	return redisconn.Result{Val: v, Err: err}
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

type nilConn struct{}

var errNil = fmt.Errorf("rueidisconn: New was given a nil client (%w)", redisconn.ErrUnusable)

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

// Addr returns the server address of a single-node client, and "" when the
// client spans several nodes.
func (c conn) Addr() string {
	nodes := c.c.Nodes()
	if len(nodes) != 1 {
		return ""
	}
	for addr := range nodes {
		return addr
	}
	return ""
}
