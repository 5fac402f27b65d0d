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

// Clean runs a clean-up on g: it calls look at once, then again after each
// of LateChecks in turn while look finds Nothing, and with backoff while
// it finds the server Unreachable; it stops when look has Cleaned, when
// every late check found Nothing, at deadline (by when what was to be
// cleaned has expired by itself), or when g is closed. It reports false,
// and does nothing, once g is closed.
func (g *Group) Clean(deadline time.Time, look func(ctx context.Context) Outcome) bool {
	return g.Go(func(ctx context.Context) {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
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
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	})
}
