package zklock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// The ensemble restarted without its data refuses the old session for ever
// ("it has seen zxid ... our last zxid is ..."): no expiry ever comes. The
// holder's lease ends no later than its Until; the Client gives the
// session up one session timeout after it lost its connection, starts a
// new one, and a Lock on it succeeds (issue 15). A new client is granted
// the lock as soon as the blank server is up, possibly before the old
// holder's Until: the measured overlap is logged, and the new fence is
// still larger (see the package documentation).
func TestIntegrationRestartEmptyStartsANewSession(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		t.Parallel() // each on servers of its own; mostly waiting for a session timeout
		z := testenv.StartZooKeeper(t)
		restartEmptyStartsANewSession(t, []string{z.Addr()}, z.RestartEmpty)
	})
	t.Run("ensemble", func(t *testing.T) {
		t.Parallel()
		e := testenv.StartEnsemble(t, 3)
		restartEmptyStartsANewSession(t, e.Addrs(), func() error { return restartAllEmpty(e) })
	})
}

// restartAllEmpty kills every server of e, then starts them all again
// without their data.
func restartAllEmpty(e *testenv.Ensemble) error {
	for _, z := range e.Servers {
		if err := z.Kill(); err != nil {
			return err
		}
	}
	errs := make([]error, len(e.Servers))
	var wg sync.WaitGroup
	for i, z := range e.Servers {
		wg.Go(func() { errs[i] = z.RestartEmpty() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func restartEmptyStartsANewSession(t *testing.T, servers []string, restartEmpty func() error) {
	ctx := ctxFor(t, 2*time.Minute)
	path := uniquePath(t)
	const timeout = 9 * time.Second // leases confirmed for 3s at a time
	s := connect(t, servers, zklock.WithSessionTimeout(timeout))
	m := s.NewMutex(path)
	// Enough writes that the blank server's zxid stays behind the
	// session's for the rest of the test, as a real ensemble's would.
	for range 100 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := s.ID()
	// Until passes while the servers restart: watch Done from now, so
	// that when it closed is taken as it happens, not once the restart
	// and the fresh client's grant are over (they took 12s beside a second
	// make test, which the check then counted against the lease).
	doneByUntil := dlocktest.WatchDoneByUntil(t, held)

	stopped := time.Now()
	if err := restartEmpty(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("server restarted empty in %v", up.Sub(stopped).Round(time.Millisecond))

	// Safety half: a client new to the blank server is granted at once.
	fresh, err := connect(t, servers).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if fresh.Fence() <= held.Fence() {
		t.Errorf("fence after the empty restart %d; want above the old holder's %d", fresh.Fence(), held.Fence())
	}
	for _, f := range []uint64{held.Fence(), fresh.Fence()} {
		if f >= 1<<53 {
			t.Errorf("fence %d is not below 2^53: JSON and JavaScript readers round it", f)
		}
	}
	if overlap := held.Until().Sub(granted); overlap > 0 {
		t.Logf("a new client was granted %v before the old holder's Until (the documented limit of an ensemble that loses its data)", overlap.Round(time.Millisecond))
	}
	fresh.Release(ctx)

	// Done closes at Until on a local timer, not when the session is given
	// up (a session timeout later, 9s): no later than an ordinary timer due
	// at Until (a loaded machine runs both late, by more than a second
	// beside five other test runs).
	doneByUntil(max(time.Until(held.Until()), 0)+timeout, "the ensemble restarted empty")
	if !errors.Is(held.Err(), dlock.ErrLost) {
		t.Errorf("Err = %v; want ErrLost", held.Err())
	}

	// Liveness half: the Client gives the refused session up one session
	// timeout after the server stopped, and the next Lock succeeds on a new
	// session; 10s more covers connecting on a loaded machine.
	lctx, cancel := context.WithDeadline(ctx, up.Add(timeout+10*time.Second))
	defer cancel()
	again, err := m.Lock(lctx)
	if err != nil {
		t.Fatalf("Lock on the Session %v after the empty restart: %v (session %#x, was %#x)", time.Since(up).Round(time.Millisecond), err, s.ID(), old)
	}
	t.Logf("Lock on the old Session succeeded %v after the restart, on session %#x (was %#x)", time.Since(up).Round(time.Millisecond), s.ID(), old)
	if s.ID() == old || s.ID() == 0 {
		t.Errorf("session %#x; want a new one", s.ID())
	}
	if again.Fence() <= fresh.Fence() {
		t.Errorf("fence %d after %d", again.Fence(), fresh.Fence())
	}
	if err := again.Release(ctx); err != nil {
		t.Error(err)
	}
}
