package rueidisconn

import (
	"context"
	"errors"

	"github.com/dlock-go/dlock/redislock/transport"
)

// Command runs one plain command, such as CONFIG GET appendfsync, and
// returns its reply as Eval returns a script's. Package redlock reads the
// nodes' configuration with it.
func (c conn) Command(ctx context.Context, args ...string) transport.Result {
	if len(args) == 0 {
		return transport.Result{Err: errNoCommand}
	}
	var res [1]transport.Result
	bounded(ctx, res[:], func(res []transport.Result) {
		res[0] = result(c.c.Do(ctx, c.c.B().Arbitrary(args[0]).Args(args[1:]...).Build()))
	})
	return res[0]
}

// Command fails as every call of a Conn made from a nil client does.
func (nilConn) Command(context.Context, ...string) transport.Result {
	return transport.Result{Err: errNil}
}

var errNoCommand = errors.New("rueidisconn: Command needs at least the command's name")
