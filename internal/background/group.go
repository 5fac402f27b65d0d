// Package background runs a client's clean-up work (deleting keys or nodes
// that an interrupted call may have left) on goroutines that the client's
// Close waits for, for a bounded time, and then cancels.
package background

import (
	"context"
	"sync"
	"time"
)

// MaxCleanups is the largest number of clean-ups (see Group.Clean) that
// one Group runs at once. Past it, Clean refuses work: what an interrupted
// call left then expires by itself, within its TTL. It bounds the
// goroutines a storm of failed calls can start.
const MaxCleanups = 1024

// A Group runs functions in the background until it is closed. The zero
// value is ready to use. Its methods are safe for concurrent use.
type Group struct {
	mu       sync.Mutex // guards closed, cleanups, and Add on wg and cleaning
	closed   bool
	wg       sync.WaitGroup  // all work
	cleaning sync.WaitGroup  // clean-ups only
	cleanups int             // clean-ups running
	ctx      context.Context // cancelled by Close; made on first use
	cancel   context.CancelFunc
}

// Go runs f on a goroutine of its own with a context that Close cancels.
// It reports false, and does nothing, once the Group is closed.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.start()
	ctx := g.ctx
	g.wg.Go(func() { f(ctx) })
	return true
}

// start makes the Group's context. g.mu must be held.
func (g *Group) start() {
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
}

// Close refuses new work, cancels the context of the work running, and
// waits for it to return. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// Finish refuses new work, gives the clean-ups running up to timeout to
// finish by themselves, and then closes the Group as Close does. It
// reports whether every clean-up finished in time.
func (g *Group) Finish(timeout time.Duration) bool {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.cleaning.Wait(); close(done) }()
	finished := true
	select {
	case <-done:
	case <-time.After(timeout):
		finished = false
	}
	g.Close()
	return finished
}
