package fence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// A request waiting for its resource's turn, behind an admitted request
// that is slow, returns when its context ends: its client has gone, and
// it must not hold a goroutine, and its place, until the slow one ends.
func TestHandlerWaitHonoursContext(t *testing.T) {
	slow, started := make(chan struct{}), make(chan struct{})
	var admitted atomic.Int32
	h := fence.Handler(fence.NewMemory(), func(r *http.Request) string { return "res" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if admitted.Add(1) == 1 {
			close(started)
			<-slow
		}
	}))
	first := make(chan struct{})
	go func() {
		defer close(first)
		req := httptest.NewRequest("PUT", "/res", nil)
		req.Header.Set(fence.Header, "5")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-started
	const n = 50
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan int, n)
	for range n {
		go func() {
			req := httptest.NewRequest("PUT", "/res", nil).WithContext(ctx)
			req.Header.Set(fence.Header, "6")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			returned <- w.Code
		}()
	}
	time.Sleep(100 * time.Millisecond) // they wait for the turn
	cancel()
	got := 0
	deadline := time.After(10 * time.Second)
wait:
	for got < n {
		select {
		case code := <-returned:
			if code == http.StatusOK {
				t.Errorf("a cancelled request was admitted")
			}
			got++
		case <-deadline:
			break wait
		}
	}
	close(slow)
	<-first
	if got != n {
		t.Errorf("%d of %d cancelled requests returned within 10s while an admitted request was slow; want all", got, n)
		for got < n {
			<-returned
			got++
		}
	}
	if a := admitted.Load(); a != 1 {
		t.Errorf("%d requests reached the handler; want only the first", a)
	}
	// The turn is free again.
	req := httptest.NewRequest("PUT", "/res", nil)
	req.Header.Set(fence.Header, "7")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("a request after the cancelled ones: %d; want 200", w.Code)
	}
}
