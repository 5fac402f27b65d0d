package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// requestMemory is how long the server remembers the outcome of a call
// that must take effect once (see evalOnce): longer than a copy of the
// call can still arrive. A copy buffered by a paused server runs when it
// resumes; one sent into a partition is retransmitted by TCP for up to
// about 15 minutes (Linux's tcp_retries2) before its connection gives up.
var requestMemory = 20 * time.Minute

// onceRetry spaces out the tries of a call whose outcome is unknown.
var onceRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// evalOnce runs a script that changes a count (a semaphore's limit, a
// latch's count), which must take effect exactly once. Each call gets a
// request id: the script records its outcome under base+":req:"+id for
// requestMemory and, run again with that id, returns the recorded outcome
// without acting. So when a reply is lost (a timeout, a reset connection),
// evalOnce sends the same request again until the server answers or ctx
// is done: the change is made once however many copies run.
//
// keys end with the record's key, added by evalOnce; the script's last
// argument is the memory in milliseconds, also added here.
func (c *Client) evalOnce(ctx context.Context, base string, s *redisscript.Script, keys []string, args ...string) (any, error) {
	keys = append(keys[:len(keys):len(keys)], base+":req:"+dlock.NewToken())
	args = append(args[:len(args):len(args)], strconv.FormatInt(requestMemory.Milliseconds(), 10))
	for n := 1; ; n++ {
		v, err := c.eval(ctx, s, keys, args...)
		if err == nil || isReply(err) {
			return v, err
		}
		if cause := cancelled(ctx, err); cause != nil {
			if n == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("%w (the request was sent %d times and took effect at most once; whether it did is unknown)", err, n)
		}
		wait, _ := onceRetry.Backoff(n)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (the request was sent %d times and took effect at most once; whether it did is unknown)", ctx.Err(), n)
		case <-t.C:
		}
	}
}
