package lockbench

import (
	"context"
	"sync/atomic"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// countingConn counts round trips: every Eval is one pipeline.
type countingConn struct {
	redislock.Conn
	evals    atomic.Int64 // Eval calls (round trips)
	calls    atomic.Int64 // script calls carried by them
	maxBatch atomic.Int64
}

func (c *countingConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	c.evals.Add(1)
	n := int64(len(calls))
	c.calls.Add(n)
	for {
		m := c.maxBatch.Load()
		if n <= m || c.maxBatch.CompareAndSwap(m, n) {
			break
		}
	}
	c.Conn.Eval(ctx, calls, results)
}
