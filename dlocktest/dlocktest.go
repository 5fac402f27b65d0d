// Package dlocktest is the conformance suite that every dlock backend
// passes: mutual exclusion, exactly one TryLock winner, expiry, refresh,
// renewal, loss reported on Done, no grant returned with less than a third
// of its lease left, cancellation that leaves nothing behind, a Lock
// ended promptly and cleanly by its client's Close, Inspect naming the
// holder and its label, fences that strictly increase across holders,
// even across a server restart that lost its data, and one behaviour under
// transient faults: Lock waits through a pause or a restart of the
// servers, and TryLock on servers that do not answer returns within the
// backend's bound an error matching dlock.ErrUnavailable, and Release on
// them one that says so too; and the backend's Client is a dlock.Admin
// whose ForceUnlock frees a held lock. RunObserver
// checks the events a backend reports to a dlock.Observer, RunElection a
// backend's dlock.Election, and RunKinds the kinds of lock that share a
// name: one kind at a time.
//
// A third-party backend can run it too:
//
//	func TestConformance(t *testing.T) {
//		dlocktest.Run(t, dlocktest.Backend{NewLocker: ..., Sabotage: ..., ...})
//	}
package dlocktest

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Options describe the Locker a test needs.
type Options struct {
	// TTL is the lease time.
	TTL time.Duration
	// NoRenewal asks for a fixed lease that the watchdog does not renew.
	NoRenewal bool
	// MaxHold, if not 0, caps how long a lease is held (the backend's
	// WithMaxHold).
	MaxHold time.Duration
	// Observer, if not nil, is to receive the events of the client
	// NewLocker makes (redislock.WithObserver, for instance). RunObserver
	// sets it, and the case ClosedWhileWaiting, to see a Lock begin to
	// wait.
	Observer dlock.Observer
}

// A Backend is what the suite needs to exercise one lock implementation.
// Every function field is required: a suite that skipped what a backend cannot do
// would report a pass it has not earned.
type Backend struct {
	// NewLocker returns a Locker for key on a new client with its own
	// connections, as an independent process would have, and closes that
	// client when t ends.
	NewLocker func(t testing.TB, key string, o Options) dlock.Locker

	// Sabotage removes the lock on key from the server behind the
	// holder's back, as an operator deleting the key would.
	Sabotage func(t testing.TB, key string)

	// Pause stops every server for d (SIGSTOP), then resumes it.
	Pause func(t testing.TB, d time.Duration)

	// RestartEmpty restarts every server without its data.
	RestartEmpty func(t testing.TB)

	// SplitVotes is true for quorum backends (Redlock): attempts that
	// collide can split the nodes' votes so that none of them wins. A
	// TryLock race must then have at most one winner, rather than exactly
	// one. It is optional, as is FencesRestartWithData.
	SplitVotes bool

	// FencesRestartWithData is true for a backend whose fences are the
	// server's own counter and start again when every server loses its
	// data (etcd's revisions), as its package documents. The suite then
	// checks that the lock works after RestartEmpty and that its fences
	// did start again, so that the declaration stays true.
	FencesRestartWithData bool

	// Leftovers describes any server-side state left for key that a
	// released, uncontended lock should not leave: lock keys, queue
	// entries, subscriptions. The fence counter is expected to stay.
	Leftovers func(t testing.TB, key string) []string

	// Inspect returns what the backend's Client.Inspect reports for the
	// lock NewLocker makes for key, from a client of its own.
	Inspect func(t testing.TB, key string) dlock.Info

	// CloseClient closes the client that NewLocker made l on, as its
	// application would (redislock's Client.Close, for instance), and
	// returns what Close returned. The suite closes a client only while
	// one of its Locks waits. A Backend without it fails the case
	// ClosedWhileWaiting. A Closers's Close method serves.
	CloseClient func(l dlock.Locker) error

	// ErrClosed is the backend's error of a closed client, which a Lock
	// ended by CloseClient must match: dlock.ErrClosed for every backend
	// of this module.
	// A Backend without it fails the case ClosedWhileWaiting.
	ErrClosed error

	// Kinds lists every kind of lock the backend offers on one name, the
	// one NewLocker makes among them, for RunKinds: a kind left out is one
	// RunKinds cannot check, so a backend lists them all (and one with a
	// single kind lists that one), and its package doc names the kinds it
	// does not offer. Run does not use it.
	Kinds []Kind

	// Enqueue puts an entry of kind k in the queue of the name NewLocker
	// uses for key, behind whatever is there, as an attempt of k leaves it
	// until it learns that another kind of lock holds the name (a key, a
	// node); the entry waits and never holds. It returns a function that
	// removes the entry. Only RunKinds uses it, for the case Queued; nil
	// for a backend whose attempts keep nothing queued on the server while
	// they learn the holder's kind (Redis, SQL), for which RunKinds skips
	// that case, saying so.
	Enqueue func(t testing.TB, key string, k Kind) (remove func())

	// Restart restarts every server, keeping what it persists, as an
	// operator's restart or a crash and a supervisor's restart would.
	// Required.
	Restart func(t testing.TB)

	// Unreachable returns a Locker for key on a new client whose every
	// connection to the servers passes through a fault proxy, and a
	// function that makes the proxy fail: silent (connections accepted,
	// nothing forwarded either way) or, with refuse, refusing (new
	// connections refused, open ones reset), as servers that stopped or
	// went away leave the client. Required.
	Unreachable func(t testing.TB, key string, o Options) (l dlock.Locker, fail func(refuse bool))

	// TryLockBound is how long TryLock may take when the servers do not
	// answer, as the backend documents. Release on such servers returns
	// within it too, or by the lease's Until if that is later.
	TryLockBound time.Duration

	// Admin returns the backend's Client, as a dlock.Admin, on
	// connections of its own, and closes it when t ends. The suite calls
	// its Inspect and ForceUnlock with the name LockName gives. A Backend
	// without it fails the case AdminForceUnlock. The case
	// ReleaseDuringRenewal asks its Inspect who holds a lock found held
	// after a Release that got no answer: the released lease, or another.
	Admin func(t testing.TB) dlock.Admin

	// LockName returns the name that the events of the lock NewLocker
	// makes for key carry (Event.Name): the name the backend was given,
	// such as a ZooKeeper path made from key, which its dlock.Admin knows
	// the lock by too. RunObserver and the case AdminForceUnlock use it;
	// nil means key itself.
	LockName func(key string) string
}

// Slack is the scheduling allowance the suite grants to timing checks: a
// loaded two-core CI machine running tests under -race needs it.
var Slack = 150 * time.Millisecond

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, b Backend) {
	if b.NewLocker == nil || b.Sabotage == nil || b.Pause == nil || b.RestartEmpty == nil || b.Leftovers == nil || b.Inspect == nil ||
		b.Restart == nil || b.Unreachable == nil || b.TryLockBound <= 0 {
		t.Fatalf("dlocktest: every field of Backend is required; got %+v", b)
	}
	s := &suite{b: b}
	t.Run("MutualExclusion", s.mutualExclusion)
	t.Run("TryLockRace", s.tryLockRace)
	t.Run("LeaseAccessors", s.leaseAccessors)
	t.Run("ReleaseIsIdempotent", s.releaseIsIdempotent)
	t.Run("Expiry", s.expiry)
	t.Run("Refresh", s.refresh)
	t.Run("Renewal", s.renewal)
	t.Run("ReleaseAfterLossIsRefused", s.releaseAfterLoss)
	t.Run("ExternalDeletionReported", s.externalDeletion)
	t.Run("ServerPauseReportedBeforeUntil", s.serverPause)
	t.Run("GrantNotShort", s.grantNotShort)
	t.Run("CancelledWait", s.cancelledWait)
	t.Run("CancelledDuringAttempt", s.cancelledDuringAttempt)
	t.Run("FencesIncreaseAcrossRestart", s.fencesAcrossRestart)
	t.Run("ReleaseDuringRenewal", s.releaseDuringRenewal)
	t.Run("MaxHold", s.maxHold)
	t.Run("InspectShowsHolder", s.inspectShowsHolder)
	t.Run("AdminForceUnlock", s.adminForceUnlock)
	t.Run("ClosedWhileWaiting", s.closedWhileWaiting)
	t.Run("TTLOutOfRange", s.ttlOutOfRange)
	t.Run("LockWaitsThroughPause", s.lockWaitsThroughPause)
	t.Run("LockWaitsThroughRestart", s.lockWaitsThroughRestart)
	// These cases fail only connections of their own, through a fault
	// proxy (Backend.Unreachable), and mostly wait for bounds to run out:
	// they run side by side, once the cases above, which pause and restart
	// the servers, are over (t.Parallel).
	t.Run("TryLockUnavailable", parallel(s.tryLockUnavailable))
	t.Run("LockUnavailableUntilContext", parallel(s.lockUnavailableUntilContext))
	t.Run("LockWaitingWhenServersGo", parallel(s.lockWaitingWhenServersGo))
	t.Run("ClosedWhileUnavailable", parallel(s.closedWhileUnavailable))
	t.Run("ReleaseUnavailable", parallel(s.releaseUnavailable))
}

// parallel returns f as a test that runs in parallel with its siblings
// that call t.Parallel too.
func parallel(f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		f(t)
	}
}

type suite struct{ b Backend }
