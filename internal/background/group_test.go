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
			g.Clean(time.Now().Add(time.Minute), func(context.Context) Outcome {
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
	if g.Clean(time.Now().Add(time.Minute), func(context.Context) Outcome { return Nothing }) {
		t.Error("Clean on a closed Group was accepted")
	}
}
