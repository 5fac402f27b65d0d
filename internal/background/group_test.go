package background

import (
	"context"
	"testing"
	"time"
)

func TestGroup(t *testing.T) {
	var g Group
	started, stopped := make(chan struct{}), make(chan struct{})
	if !g.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(stopped)
	}) {
		t.Fatal("Go refused work on an open Group")
	}
	<-started
	done := make(chan struct{})
	go func() { g.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cancel and wait for the running work")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned before the work did")
	}
	if g.Go(func(context.Context) { t.Error("work ran after Close") }) {
		t.Error("Go accepted work after Close")
	}
	g.Close() // idempotent
	var empty Group
	empty.Close() // nothing started: nothing to wait for
}

func TestCleanLooksLate(t *testing.T) {
	saved := LateChecks
	LateChecks = []time.Duration{time.Millisecond, 2 * time.Millisecond}
	defer func() { LateChecks = saved }()
	for _, tc := range []struct {
		name     string
		outcomes []Outcome // what successive looks find; Nothing after the list
		want     int       // looks taken
	}{
		{"cleaned at once", []Outcome{Cleaned}, 1},
		{"nothing, ever", nil, 3}, // at once, then after each late check
		{"lands late", []Outcome{Nothing, Nothing, Cleaned}, 3},
		{"unreachable, then nothing", []Outcome{Unreachable, Unreachable}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Group
			looks := 0
			done := make(chan struct{})
			g.Clean(func(context.Context) Outcome {
				looks++
				if looks <= len(tc.outcomes) {
					if tc.outcomes[looks-1] == Cleaned {
						close(done)
					}
					return tc.outcomes[looks-1]
				}
				if looks == tc.want {
					close(done)
				}
				return Nothing
			})
			<-done
			time.Sleep(20 * time.Millisecond) // time for looks it should not take
			g.Close()
			if looks != tc.want {
				t.Errorf("%d looks; want %d", looks, tc.want)
			}
		})
	}
	var g Group
	g.Close()
	if g.Clean(func(context.Context) Outcome { return Nothing }) {
		t.Error("Clean on a closed Group was accepted")
	}
}

// A clean-up that cannot reach its server keeps trying, past any TTL,
// until the server answers; Finish gives it its time, then cancels it.
func TestCleanOutlastsAnUnreachableServer(t *testing.T) {
	saved := LateChecks
	LateChecks = []time.Duration{time.Millisecond}
	defer func() { LateChecks = saved }()
	var g Group
	looks := make(chan int, 100)
	n := 0
	g.Clean(func(context.Context) Outcome {
		n++
		looks <- n
		if n < 5 {
			return Unreachable
		}
		return Nothing
	})
	if !g.Finish(10 * time.Second) {
		t.Fatal("Finish: the clean-up did not finish once the server answered")
	}
	if n != 6 { // four unreachable, the first answer, one late check
		t.Errorf("%d looks; want 6", n)
	}
	var stuck Group
	stuck.Clean(func(ctx context.Context) Outcome { return Unreachable })
	start := time.Now()
	if stuck.Finish(50 * time.Millisecond) {
		t.Error("Finish reported a clean-up that never reached its server as finished")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Finish took %v with a 50ms timeout", took)
	}
}

// At most MaxCleanups run at once; Finish and Close refuse more.
func TestCleanIsBounded(t *testing.T) {
	var g Group
	release := make(chan struct{})
	for i := range MaxCleanups {
		if !g.Clean(func(ctx context.Context) Outcome {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Cleaned
		}) {
			t.Fatalf("clean-up %d refused below the bound", i)
		}
	}
	if g.Clean(func(context.Context) Outcome { return Cleaned }) {
		t.Error("a clean-up past MaxCleanups was accepted")
	}
	close(release)
	if !g.Finish(10 * time.Second) {
		t.Error("Finish: the clean-ups did not finish")
	}
	if g.Clean(func(context.Context) Outcome { return Cleaned }) {
		t.Error("a clean-up was accepted after Finish")
	}
}
