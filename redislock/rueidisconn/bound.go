package rueidisconn

import (
	"context"

	"github.com/dlock-go/dlock/redisconn"
)

// bounded runs call, which fills results, and returns by ctx's end
// whatever rueidis does. rueidis bounds a call by its context once the
// call has a connection, but a call that finds its connection being made
// by another (a Cluster client's topology refresh, another goroutine's
// call) waits for that dial, whose handshake with a silent server takes
// the client's ConnWriteTimeout: ten seconds by default. A call given up
// so may still be sent later, as one that timed out may: its results say
// ctx's error, which redislock treats as an outcome unknown.
func bounded(ctx context.Context, results []redisconn.Result, call func(results []redisconn.Result)) {
	if ctx.Done() == nil {
		call(results)
		return
	}
	own := make([]redisconn.Result, len(results))
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(own)
	}()
	select {
	case <-done:
		copy(results, own)
	case <-ctx.Done():
		for i := range results {
			results[i] = redisconn.Result{Err: context.Cause(ctx)}
		}
	}
}
