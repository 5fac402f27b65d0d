// Package dbleasetest holds the tests and test helpers that pglock and
// mysqllock share: their TestMain, and the checks of behaviour that
// internal/dblease gives both, written once over dlock.Locker and the
// little of the database each check needs to reach. A backend's test
// file keeps what differs: its SQL, its driver and its server.
package dbleasetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Main runs a package's tests with a server that launch starts (and
// prepares) for the tests that share one. pkg names the package in
// messages. Under -short it starts none. Without the server's binary
// (look fails) the tests are skipped with a message, or fail when CI is
// set. Every server testenv started is stopped before Main exits.
func Main(m *testing.M, pkg string, look, launch func() error) {
	if testenv.ShortMain() { // the examples need a server
		os.Exit(m.Run())
	}
	if err := look(); err != nil {
		fmt.Fprintf(os.Stderr, "SKIP %s tests: %v\n", pkg, err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := launch(); err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: %v\n", pkg, err)
		testenv.StopAll()
		os.Exit(1)
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: stopping servers: %v\n", pkg, err)
		code = 1
	}
	os.Exit(code)
}

// Unique returns base with a random suffix: tests that share a database
// must not meet each other's tables, rows and locks, even run again with
// -count.
func Unique(base string) string { return fmt.Sprintf("%s_%08x", base, rand.Uint32()) }

// Ctx returns a context that ends after d, or when t ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A LockResult is what a Lock started by StartLock returned, and when.
type LockResult struct {
	Lease dlock.Lease
	Err   error
	At    time.Time
}

// StartLock starts l.Lock(ctx) on a goroutine and returns a channel that
// receives its lease and error.
func StartLock(ctx context.Context, l dlock.Locker) <-chan LockResult {
	done := make(chan LockResult, 1)
	go func() {
		lease, err := l.Lock(ctx)
		done <- LockResult{lease, err, time.Now()}
	}()
	return done
}

// WaitFor fails t unless done delivers a lease within d, and returns it.
// what says when the lease was due, for the message.
func WaitFor(t testing.TB, done <-chan LockResult, d time.Duration, what string) LockResult {
	t.Helper()
	select {
	case r := <-done:
		if r.Err != nil {
			t.Fatalf("Lock %s: %v", what, r.Err)
		}
		return r
	case <-time.After(d):
		t.Fatalf("Lock %s: still waiting after %v", what, d)
	}
	return LockResult{}
}
