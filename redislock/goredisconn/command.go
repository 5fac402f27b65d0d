package goredisconn

import (
	"context"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/redis/go-redis/v9"
)

// Command runs one plain command, such as CONFIG GET appendfsync, and
// returns its reply as Eval returns a script's. Package redlock reads the
// nodes' configuration with it.
func (c *conn) Command(ctx context.Context, args ...string) redisconn.Result {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	cmd := redis.NewCmd(ctx, a...)
	c.c.Process(ctx, cmd)
	return result(cmd)
}

// Command fails as every call of a Conn made from a nil client does.
func (nilConn) Command(context.Context, ...string) redisconn.Result {
	return redisconn.Result{Err: errNil}
}
