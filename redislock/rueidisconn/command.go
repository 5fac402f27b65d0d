package rueidisconn

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/redisconn"
)

// Command runs one plain command, such as CONFIG GET appendfsync, and
// returns its reply as Eval returns a script's. Package redlock reads the
// nodes' configuration with it.
func (c conn) Command(ctx context.Context, args ...string) redisconn.Result {
	if len(args) == 0 {
		return redisconn.Result{Err: errNoCommand}
	}
	var res [1]redisconn.Result
	bounded(ctx, res[:], func(res []redisconn.Result) {
		res[0] = result(c.c.Do(ctx, c.c.B().Arbitrary(args[0]).Args(args[1:]...).Build()))
	})
	return res[0]
}

// Command fails as every call of a Conn made from a nil client does.
func (nilConn) Command(context.Context, ...string) redisconn.Result {
	return redisconn.Result{Err: errNil}
}

var errNoCommand = errors.New("rueidisconn: Command needs at least the command's name")
