// Package pause holds the wait between two attempts of a blocking Lock,
// shared by every backend: until a wake-up arrives, a delay passes, or the
// caller gives up.
package pause

import (
	"context"
	"time"
)

// A Timer waits between attempts, reusing one time.Timer across the waits
// of a call. The zero Timer is ready; Stop it when the call returns. It is
// not safe for concurrent use.
type Timer struct{ t *time.Timer }

// Wait waits until d has passed, wake delivers (a nil wake never does) or
// ctx is done. It reports false if ctx ended the wait.
func (p *Timer) Wait(ctx context.Context, wake <-chan struct{}, d time.Duration) bool {
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d) // since Go 1.23, Reset leaves no stale tick behind
	}
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-p.t.C:
	}
	return true
}

// Stop releases the timer.
func (p *Timer) Stop() {
	if p.t != nil {
		p.t.Stop()
	}
}
