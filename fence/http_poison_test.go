package fence_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

// One request with fence 2^63-1 poisons a resource: every real holder
// after it is refused (409), with every store, until an operator resets
// the resource's record, which the store's observer hears of; a reset to
// 0 forgets it. A store made with WithMaxJump refuses the forged fence
// (400) and records nothing, and still takes a resource's first fence
// whatever it is.
func TestHandlerPoisonReset(t *testing.T) {
	const poison = "9223372036854775807"
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, bound := range []uint64{0, 1000} {
		rec := &recorder{}
		for _, s := range storesWith(t, fence.WithMaxJump(bound), fence.WithObserver(rec)) {
			t.Run(fmt.Sprintf("%s/max-jump-%d", s.name, bound), func(t *testing.T) {
				ctx := ctxFor(t, 30*time.Second)
				srv := httptest.NewServer(fence.Handler(s.store, func(r *http.Request) string { return r.URL.Path }, ok))
				defer srv.Close()
				res := "/" + unique("acct")
				steps := []struct {
					fence string
					code  int
				}{{"100", 200}, {poison, 200}, {"101", 409}}
				if bound > 0 {
					steps = []struct {
						fence string
						code  int
					}{{"100", 200}, {poison, 400}, {"1101", 400}, {"1100", 200}, {"101", 409}, {"2100", 200}}
				}
				for _, c := range steps {
					if code, body := send(t, srv.URL+res, c.fence); code != c.code {
						t.Fatalf("fence %s: %d %q; want %d", c.fence, code, body, c.code)
					} else if code == 400 && !strings.Contains(body, "WithMaxJump") {
						t.Errorf("fence %s: %q; want it to name WithMaxJump", c.fence, body)
					}
				}
				if bound > 0 {
					if code, _ := send(t, srv.URL+"/"+unique("first"), "4611686018427387904"); code != 200 {
						t.Errorf("a resource's first fence, 2^62: %d; want 200", code)
					}
					return
				}
				r, ok := s.store.(fence.Resetter)
				if !ok {
					t.Fatalf("%T is not a Resetter", s.store)
				}
				rec.take()
				prev, err := r.Reset(ctx, res, 101)
				if err != nil || fmt.Sprint(prev) != poison {
					t.Fatalf("Reset to 101: %d, %v; want %s", prev, err, poison)
				}
				if got, want := rec.take(), fmt.Sprintf("[fence-reset %s %s 101 previous %s]", guardName(s.name), res, poison); got != want {
					t.Errorf("observer: %s; want %s", got, want)
				}
				for _, c := range []struct {
					fence string
					code  int
				}{{"100", 409}, {"101", 200}, {"102", 200}} {
					if code, body := send(t, srv.URL+res, c.fence); code != c.code {
						t.Errorf("after the reset, fence %s: %d %q; want %d", c.fence, code, body, c.code)
					}
				}
				if prev, err := r.Reset(ctx, res, 0); err != nil || prev != 102 {
					t.Errorf("Reset to 0: %d, %v; want 102", prev, err)
				}
				if code, _ := send(t, srv.URL+res, "5"); code != 200 {
					t.Errorf("after a reset to 0, fence 5: %d; want 200", code)
				}
				if prev, err := r.Reset(ctx, "/"+unique("never"), 0); err != nil || prev != 0 {
					t.Errorf("Reset of a resource never written: %d, %v; want 0", prev, err)
				}
				if _, err := r.Reset(ctx, "", 5); err == nil {
					t.Error("Reset of an empty resource name: no error")
				}
			})
		}
	}
}

// guardName is the guard that a store of stores reports events as.
func guardName(store string) string {
	switch store {
	case "memory":
		return "Memory"
	case "redis":
		return "Redis"
	}
	return "SQL"
}
