package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
)

// Re-entry takes another hold only of a node of the same kind: the Context
// of a semaphore lease, of an RWMutex read lease or of a downgraded writer
// does not let a Mutex in at once while another Client shares the path,
// nor does a Mutex lease's Context let in an RWMutex side. Each is refused
// with an error matching dlock.ErrKindMismatch and dlock.ErrNotObtained
// that names both kinds, as another kind held by anyone is, and leaves no
// node behind (issue 15; ErrNotObtained, issue 31).
func TestIntegrationReentryChecksKind(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	s := connect(t, servers)
	other := connect(t, servers)
	adm := admin(t, servers)
	for _, tt := range []struct {
		name string
		// hold takes, on path, a lease in s and another in other (or none),
		// and returns the one in s.
		hold  func(t *testing.T, path string) dlock.Lease
		asker func(path string) dlock.Locker
		want  string
	}{
		{"semaphore permit", func(t *testing.T, path string) dlock.Lease {
			mine := mustLock(t, ctx, s.NewSemaphore(path, 2))
			mustLock(t, ctx, other.NewSemaphore(path, 2))
			return mine
		}, func(p string) dlock.Locker { return s.NewMutex(p) }, "Semaphore"},
		{"RWMutex read lease", func(t *testing.T, path string) dlock.Lease {
			mine := mustLock(t, ctx, s.NewRWMutex(path).Reader())
			mustLock(t, ctx, other.NewRWMutex(path).Reader())
			return mine
		}, func(p string) dlock.Locker { return s.NewMutex(p) }, "RWMutex reader"},
		{"downgraded writer", func(t *testing.T, path string) dlock.Lease {
			rw := s.NewRWMutex(path)
			w := mustLock(t, ctx, rw.Writer())
			r, err := rw.Downgrade(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			mustLock(t, ctx, other.NewRWMutex(path).Reader())
			return r
		}, func(p string) dlock.Locker { return s.NewMutex(p) }, "downgraded writer"},
		{"Mutex lease, RWMutex reader", func(t *testing.T, path string) dlock.Lease {
			return mustLock(t, ctx, s.NewMutex(path))
		}, func(p string) dlock.Locker { return s.NewRWMutex(p).Reader() }, "Mutex"},
		{"Mutex lease, RWMutex writer", func(t *testing.T, path string) dlock.Lease {
			return mustLock(t, ctx, s.NewMutex(path))
		}, func(p string) dlock.Locker { return s.NewRWMutex(p).Writer() }, "Mutex"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := uniquePath(t)
			held := tt.hold(t, path)
			nodes := len(children(t, adm, path))
			for _, op := range []string{"TryLock", "Lock"} {
				l := tt.asker(path)
				f := l.TryLock
				if op == "Lock" {
					f = l.Lock
				}
				lctx, cancel := context.WithTimeout(held.Context(), 2*time.Second)
				got, err := f(lctx)
				cancel()
				if err == nil {
					t.Errorf("%s under the Context of a %s = a lease (fence %d) while it is held: want dlock.ErrKindMismatch", op, tt.name, got.Fence())
					got.Release(ctx)
					continue
				}
				if !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s under the Context of a %s = %v; want dlock.ErrKindMismatch and dlock.ErrNotObtained, naming %q", op, tt.name, err, tt.want)
				}
			}
			if n := len(children(t, adm, path)); n != nodes {
				t.Errorf("%d nodes after the refused calls; want the %d held", n, nodes)
			}
			if held.Err() != nil {
				t.Errorf("the lease whose Context was used: Err = %v", held.Err())
			}
		})
	}
}

// A Mutex is not reentrant: asked again through its own lease's Context,
// or with the lease's owner given by dlock.WithOwner, it refuses with
// ErrNotReentrant at once and creates no node, where it used to take
// another hold (only ReentrantMutex does); through an unrelated context it
// waits like anyone else.
func TestIntegrationMutexIsNotReentrant(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	s := connect(t, servers)
	adm := admin(t, servers)
	path := uniquePath(t)
	m := s.NewMutex(path)
	held := mustLock(t, ctx, m)
	for _, c := range []context.Context{held.Context(), dlock.WithOwner(ctx, held.Token())} {
		for _, f := range []func(context.Context) (dlock.Lease, error){m.TryLock, m.Lock, s.NewMutex(path).Lock} {
			if l, err := f(c); !errors.Is(err, dlock.ErrNotReentrant) {
				t.Errorf("Mutex asked again by its holder = %v, %v; want ErrNotReentrant", l, err)
			}
		}
	}
	if n := len(children(t, adm, path)); n != 1 {
		t.Errorf("%d nodes after the refused calls; want the holder's only", n)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if l, err := m.Lock(wctx); !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Mutex asked again through an unrelated context = %v, %v; want it to wait until the deadline", l, err)
	}
}

// Re-entering with a shorter TTL, and releasing that inner hold, never
// shortens the outer hold: the node is the lock, the session keeps it, and
// the holds share the confirmations of the first hold's lease time
// (issue 15, item 2).
func TestIntegrationReentryKeepsTheOuterTTL(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	servers := []string{sharedZK(t).Addr()}
	s := connect(t, servers, zklock.WithSessionTimeout(9*time.Second)) // confirmations good for 3s
	path := uniquePath(t)
	outer := mustLock(t, ctx, s.NewReentrantMutex(path))
	before := outer.Until()
	inner, err := s.NewReentrantMutex(path, zklock.WithTTL(100*time.Millisecond), zklock.WithoutRenewal()).TryLock(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if inner.Until().Before(before) || outer.Until().Before(before) {
		t.Errorf("re-entry with a 100ms TTL: outer Until %v, inner %v; want neither before the outer's %v", outer.Until(), inner.Until(), before)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Past the inner TTL several times over, the outer hold stands and
	// keeps being confirmed, and nobody else gets in.
	rival := connect(t, servers).NewMutex(path)
	for range 3 {
		time.Sleep(500 * time.Millisecond)
		if _, err := rival.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("a rival's TryLock after the inner release = %v; want ErrNotObtained", err)
		}
	}
	if outer.Err() != nil || outer.Until().Before(before) {
		t.Errorf("outer after the inner release: Err %v, Until %v (was %v)", outer.Err(), outer.Until(), before)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// mustLock takes l or fails t.
func mustLock(t testing.TB, ctx context.Context, l dlock.Locker) dlock.Lease {
	t.Helper()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	t.Cleanup(func() { lease.Release(context.Background()) })
	return lease
}
