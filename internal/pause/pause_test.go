package pause

import (
	"context"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	var p Timer
	defer p.Stop()
	ctx := context.Background()

	start := time.Now()
	if !p.Wait(ctx, nil, 20*time.Millisecond) || time.Since(start) < 20*time.Millisecond {
		t.Errorf("delay: returned after %v", time.Since(start))
	}

	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	start = time.Now()
	if !p.Wait(ctx, wake, time.Hour) || time.Since(start) > time.Second {
		t.Errorf("wake-up: returned after %v", time.Since(start))
	}

	// A timer reset before it fired leaves no tick for the next wait.
	start = time.Now()
	if !p.Wait(ctx, nil, 30*time.Millisecond) || time.Since(start) < 30*time.Millisecond {
		t.Errorf("delay after a wake-up: returned after %v", time.Since(start))
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if p.Wait(cctx, nil, time.Hour) {
		t.Errorf("a done context did not end the wait")
	}
}
