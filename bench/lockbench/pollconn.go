package lockbench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// dlock's waiters in S3 are counted by a pollConn around every dlock
// client's Conn: attempts made by a waiter (acquire calls marked '*', see
// acquire.lua), release notices received, and fallback polls.
var dlockWaits struct {
	waited, notices, polls atomic.Int64
}

// pollGap is the least time between two attempts of one client, with no
// release notice between them, that counts the second as a fallback poll:
// longer than the releaser's 1ms yield, shorter than the default retry's
// first wait (8ms).
const pollGap = 4 * time.Millisecond

// pollConn classifies a client's waiting attempts: one that follows a
// release notice (received since the client's previous attempt or since it
// joined the line, join_line.lua), or a won attempt (the releaser's next
// Lock, after its yield, if it did not join), or comes within pollGap of
// the previous attempt (the retry at once after subscribing) was
// prompted; any other is a fallback poll. A Client has one waiter per
// name in S3, so per-Conn state is per-waiter state.
type pollConn struct {
	redislock.Conn
	mu     sync.Mutex
	last   time.Time // the previous attempt
	won    bool      // it took the lock
	notice bool      // a notice came since then
}

func (c *pollConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	acquire := -1
	for i, call := range calls {
		if call.Script.Name == "join_line" { // a releaser stands in line: its next attempt wants a notice
			c.mu.Lock()
			c.last, c.won, c.notice = time.Now(), false, false
			c.mu.Unlock()
			continue
		}
		if call.Script.Name != "acquire" || len(call.Args) < 4 {
			continue
		}
		acquire = i
		now := time.Now()
		c.mu.Lock()
		if call.Args[3] == "*" {
			dlockWaits.waited.Add(1)
			if !c.notice && !c.won && now.Sub(c.last) >= pollGap {
				dlockWaits.polls.Add(1)
			}
		}
		c.last, c.notice = now, false
		c.mu.Unlock()
	}
	c.Conn.Eval(ctx, calls, results)
	if acquire >= 0 {
		n, _ := results[acquire].Val.(int64)
		c.mu.Lock()
		c.won = n > 0
		c.mu.Unlock()
	}
}

func (c *pollConn) Listen(onMessage func(channel string)) redisconn.Listener {
	return c.Conn.Listen(func(ch string) {
		dlockWaits.notices.Add(1)
		c.mu.Lock()
		c.notice = true
		c.mu.Unlock()
		onMessage(ch)
	})
}

// waitCounts is a reading of dlockWaits.
type waitCounts struct{ waited, notices, polls int64 }

func readWaits() waitCounts {
	return waitCounts{dlockWaits.waited.Load(), dlockWaits.notices.Load(), dlockWaits.polls.Load()}
}
