package zklock_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/zklock"
)

// waitFrom waits for an event of kind k among rec's events from index
// from on.
func waitFrom(t *testing.T, rec *dlocktest.Recorder, from int, k dlock.EventKind) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, e := range rec.Events()[from:] {
			if e.Kind == k {
				return
			}
		}
	}
	t.Fatalf("no %v event within 10s; got %s", k, dlocktest.Kinds(rec.Events()[from:]))
}

// Every kind of lock reports its path and kind, a failed TryLock, a Lock
// that waits, and the release; a reentrant hold and a Downgrade report
// acquisitions of their own.
func TestIntegrationObserverKinds(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	holderSession := connect(t, servers)
	rec := &dlocktest.Recorder{}
	observed := connect(t, servers, zklock.WithObserver(rec))
	cases := []struct {
		kind  string
		locks func(h, o *zklock.Client, path string) (dlock.Locker, dlock.Locker)
	}{
		{"Mutex", func(h, o *zklock.Client, p string) (dlock.Locker, dlock.Locker) {
			return h.NewMutex(p), o.NewMutex(p)
		}},
		{"RWMutex.read", func(h, o *zklock.Client, p string) (dlock.Locker, dlock.Locker) {
			return h.NewRWMutex(p).Writer(), o.NewRWMutex(p).Reader()
		}},
		{"RWMutex.write", func(h, o *zklock.Client, p string) (dlock.Locker, dlock.Locker) {
			return h.NewRWMutex(p).Reader(), o.NewRWMutex(p).Writer()
		}},
		{"Semaphore", func(h, o *zklock.Client, p string) (dlock.Locker, dlock.Locker) {
			return h.NewSemaphore(p, 1), o.NewSemaphore(p, 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			path := uniquePath(t)
			from := len(rec.Events()) // events of this subtest only
			holder, lock := tc.locks(holderSession, observed, path)
			first, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lock.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
				t.Fatalf("TryLock of a held lock: %v", err)
			}
			got := make(chan dlock.Lease, 1)
			go func() {
				l, err := lock.Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
				}
				got <- l
			}()
			waitFrom(t, rec, from, dlock.EventWaiting)
			first.Release(ctx)
			l := <-got
			if l == nil {
				return
			}
			l.Release(ctx)
			dlocktest.CheckEvents(t, rec.Events()[from:], path, tc.kind, dlock.EventAcquiring, dlock.EventNotAcquired,
				dlock.EventAcquiring, dlock.EventWaiting, dlock.EventAcquired, dlock.EventReleased)
		})
	}

	t.Run("Reentrant", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		path := uniquePath(t)
		from := len(rec.Events()) // events of this subtest only
		m := observed.NewReentrantMutex(path)
		outer, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := m.TryLock(outer.Context())
		if err != nil {
			t.Fatal(err)
		}
		inner.Release(ctx)
		outer.Release(ctx)
		evs := rec.Events()[from:]
		dlocktest.CheckEvents(t, evs, path, "ReentrantMutex", dlock.EventAcquiring, dlock.EventAcquired,
			dlock.EventAcquiring, dlock.EventAcquired, dlock.EventReleased, dlock.EventReleased)
		if evs[3].Fence != outer.Fence() {
			t.Errorf("reentrant hold acquired with fence %d; want the first hold's %d", evs[3].Fence, outer.Fence())
		}
	})

	t.Run("Downgrade", func(t *testing.T) {
		ctx := ctxFor(t, 30*time.Second)
		from := len(rec.Events()) // events of this subtest only
		rw := observed.NewRWMutex(uniquePath(t))
		w, err := rw.Writer().Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rw.Downgrade(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		r.Release(ctx)
		evs := rec.Events()[from:]
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
	})
}

// WithLogger logs the lock events, alongside WithObserver.
func TestIntegrationWithLogger(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := &dlocktest.Recorder{}
	s := connect(t, servers, zklock.WithObserver(rec), zklock.WithLogger(log))
	ctx := ctxFor(t, 30*time.Second)
	path := uniquePath(t)
	l, err := s.NewMutex(path).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if n := len(rec.Events()); n != 3 {
		t.Errorf("observer got %d events; want 3", n)
	}
	out := buf.String()
	for _, want := range []string{"zklock: zookeeper client:", "dlock: acquired", "dlock: released", "lock=" + path} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
