package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/redislock"
)

// Every kind of lock reports its name and kind, a failed TryLock, a Lock
// that waits, and the release.
func TestIntegrationObserverKinds(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	cases := []struct {
		kind string
		// locks returns the lock that holds first and the lock that is
		// observed, which then fails a TryLock and waits in Lock.
		locks func(holder, observed *redislock.Client, name string) (dlock.Locker, dlock.Locker)
	}{
		{"Mutex", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewMutex(n), o.NewMutex(n)
		}},
		{"ReentrantMutex", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewReentrantMutex(n), o.NewReentrantMutex(n)
		}},
		{"FairMutex", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewFairMutex(n), o.NewFairMutex(n)
		}},
		{"RWMutex.read", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewRWMutex(n).Writer(), o.NewRWMutex(n).Reader()
		}},
		{"RWMutex.write", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewRWMutex(n).Reader(), o.NewRWMutex(n).Writer()
		}},
		{"Semaphore", func(h, o *redislock.Client, n string) (dlock.Locker, dlock.Locker) {
			return h.NewSemaphore(n, 1), o.NewSemaphore(n, 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := "observer-" + strings.ReplaceAll(tc.kind, ".", "-")
			rec := &dlocktest.Recorder{}
			holder, observed := tc.locks(newClient(t, d, goRedis), newClient(t, d, goRedis, redislock.WithObserver(rec)), name)
			first, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := observed.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
				t.Fatalf("TryLock of a held lock: %v", err)
			}
			got := make(chan dlock.Lease, 1)
			go func() {
				l, err := observed.Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
				}
				got <- l
			}()
			rec.WaitFor(t, dlock.EventWaiting, 10*time.Second)
			first.Release(ctx)
			l := <-got
			if l == nil {
				return
			}
			l.Release(ctx)
			dlocktest.CheckEvents(t, rec.Events(), name, tc.kind, dlock.EventAcquiring, dlock.EventNotAcquired,
				dlock.EventAcquiring, dlock.EventWaiting, dlock.EventAcquired, dlock.EventReleased)
		})
	}
}

// Downgrade reports the write lease released and the read lease acquired.
func TestIntegrationObserverDowngrade(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	rec := &dlocktest.Recorder{}
	rw := newClient(t, d, goRedis, redislock.WithObserver(rec)).NewRWMutex("observer-downgrade")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := rw.Writer().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rw.Downgrade(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	r.Release(ctx)
	evs := rec.Events()
	want := []struct {
		kind dlock.EventKind
		lock string
	}{
		{dlock.EventAcquiring, "RWMutex.write"}, {dlock.EventAcquired, "RWMutex.write"},
		{dlock.EventAcquiring, "RWMutex.read"}, {dlock.EventReleased, "RWMutex.write"},
		{dlock.EventAcquired, "RWMutex.read"}, {dlock.EventReleased, "RWMutex.read"},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %s; want %v", dlocktest.Kinds(evs), want)
	}
	for i, w := range want {
		if evs[i].Kind != w.kind || evs[i].Lock != w.lock {
			t.Errorf("event %d is %v %s; want %v %s", i, evs[i].Kind, evs[i].Lock, w.kind, w.lock)
		}
	}
	if evs[4].Fence != r.Fence() {
		t.Errorf("read lease acquired with fence %d; want %d", evs[4].Fence, r.Fence())
	}
}

// A reentrant hold is an acquisition of its own, with the first hold's
// fence.
func TestIntegrationObserverReentrant(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	rec := &dlocktest.Recorder{}
	m := newClient(t, d, goRedis, redislock.WithObserver(rec)).NewReentrantMutex("observer-reentrant")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	inner.Release(ctx)
	outer.Release(ctx)
	evs := rec.Events()
	dlocktest.CheckEvents(t, evs, "observer-reentrant", "ReentrantMutex", dlock.EventAcquiring, dlock.EventAcquired,
		dlock.EventAcquiring, dlock.EventAcquired, dlock.EventReleased, dlock.EventReleased)
}

// WithLogger logs the events through dlock.LogObserver, alongside
// WithObserver; nil means none.
func TestIntegrationWithLogger(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := &dlocktest.Recorder{}
	c := newClient(t, d, goRedis, redislock.WithLogger(log), redislock.WithObserver(rec), redislock.WithLogger(nil), redislock.WithLogger(log))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.NewMutex("observer-logger").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if n := len(rec.Events()); n != 3 {
		t.Errorf("observer got %d events; want 3", n)
	}
	out := buf.String()
	for _, want := range []string{"dlock: acquiring", "dlock: acquired", "dlock: released", "lock=observer-logger", "kind=mutex"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	quiet := newClient(t, d, goRedis, redislock.WithLogger(nil), redislock.WithObserver(nil))
	if l, err := quiet.NewMutex("observer-logger").TryLock(ctx); err != nil {
		t.Fatal(err)
	} else {
		l.Release(ctx)
	}
}
