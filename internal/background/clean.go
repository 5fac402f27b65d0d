package background

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
)

// LateChecks are the pauses between the looks a clean-up takes while it
// finds nothing to clean: a request delayed on a dead connection (a paused
// server reads its buffers when it resumes) can still land after a first
// look.
var LateChecks = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second}

// An Outcome is what one look of a clean-up found.
type Outcome int

const (
	// Cleaned: it cleaned up; the clean-up is done.
	Cleaned Outcome = iota
	// Nothing: there was nothing to clean, yet.
	Nothing
	// Unreachable: the server could not be reached.
	Unreachable
)

// retry spaces out the looks of a clean-up that cannot reach its server.
var retry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// Clean runs a clean-up of what an interrupted request may have left on a
// server. It calls look at once, again with backoff while look finds the
// server Unreachable, and after each of LateChecks in turn while look
// finds Nothing; it stops when look has Cleaned, when the server has
// answered Nothing after every late check, or when g is finished or
// closed.
//
// It does not stop at the request's TTL: a request still buffered on a
// server that is paused or unreachable runs when the server resumes,
// however late, and then holds for a full TTL from that moment. Only an
// answer from the server ends that possibility, once the late checks
// have passed. Clean reports false, and does nothing, once g is closed or
// when MaxCleanups are running.
func (g *Group) Clean(look func(ctx context.Context) Outcome) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.cleanups >= MaxCleanups {
		return false
	}
	g.start()
	ctx := g.ctx
	g.cleanups++
	g.cleaning.Add(1)
	g.wg.Go(func() {
		defer func() {
			g.mu.Lock()
			g.cleanups--
			g.mu.Unlock()
			g.cleaning.Done()
		}()
		clean(ctx, look)
	})
	return true
}

func clean(ctx context.Context, look func(ctx context.Context) Outcome) {
	checks := 0
	for n := 1; ; n++ {
		var wait time.Duration
		switch look(ctx) {
		case Cleaned:
			return
		case Nothing:
			if checks == len(LateChecks) {
				return
			}
			wait = LateChecks[checks]
			checks++
		default:
			wait, _ = retry.Backoff(n)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
