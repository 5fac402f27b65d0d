// Package background runs a client's clean-up work (deleting keys or nodes
// that an interrupted call may have left) on goroutines that the client's
// Close cancels and waits for.
package background

import (
	"context"
	"sync"
)

// A Group runs functions in the background until it is closed. The zero
// value is ready to use. Its methods are safe for concurrent use.
type Group struct {
	mu     sync.Mutex // guards closed, and Add on wg
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // cancelled by Close; made on first use
	cancel context.CancelFunc
}

// Go runs f on a goroutine of its own with a context that Close cancels.
// It reports false, and does nothing, once the Group is closed.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	ctx := g.ctx
	g.wg.Go(func() { f(ctx) })
	return true
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
