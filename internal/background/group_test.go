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
