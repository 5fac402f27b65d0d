package dlock

import (
	"context"
	"time"
)

// A Locker obtains one named lock. Implementations are safe for concurrent
// use by multiple goroutines.
//
// Lock and TryLock never return a lease with less than a third of its
// lease time left. A grant can reach the client with less, because its
// Until counts from the moment the request was sent: a server that stopped
// (SIGSTOP, a stall of its process or machine) answers a request sent
// before the stop only when it resumes, and a slow network or a starved
// client delays the answer too. Every backend in this module then
// refreshes the lease at once, which makes its Until count from the
// refresh; if the refresh fails, or still leaves less than a third, it
// gives the lock back and counts the attempt as failed: TryLock returns an
// error matching ErrNotObtained that says how much of the lease was left,
// and Lock tries again, as after any failed attempt. So a holder never
// starts its work with a few milliseconds of lease; it must still check
// Until against the work it is about to do, or fence its writes. A lease
// cut short by the lock's maximum hold (WithMaxHold) may have less: its
// holder asked for that.
type Locker interface {
	// Name returns the lock's name, as given to the constructor that
	// made it; every Lease of the lock returns it from Key.
	Name() string

	// Lock blocks until the lock is held, ctx is done, the retry strategy
	// gives up, or an error that waiting cannot heal occurs. When ctx is
	// done first, the error matches both ErrNotObtained and ctx.Err() under
	// errors.Is; when the retry strategy gives up, it matches
	// ErrNotObtained. If the last attempt's grant was given back for being
	// too short, the error says so.
	//
	// Lock waits through transient faults: connections refused, reset or
	// timed out, a server loading its data, a failover, an election or a
	// serialization failure under way. It backs off between attempts as
	// the retry strategy says, and when ctx ends (or the strategy gives
	// up) while the servers still fail, its error also matches
	// ErrUnavailable and names them. It fails at once only on what waiting
	// cannot heal: a refused login or permission, a bad name or option, a
	// closed client, a kind of lock the backend refuses to wait for.
	//
	// When the client that made the lock is closed while Lock waits, Lock
	// returns at once, with an error matching both ErrNotObtained and the
	// backend's ErrClosed (redislock.ErrClosed, for instance), having taken
	// back whatever its wait had put on the server: a place in a queue, a
	// waiter's node or row. The client's Close waits for it, and does not
	// report it as an error. A TryLock under way returns the same way.
	Lock(ctx context.Context) (Lease, error)

	// TryLock makes one attempt. It returns ErrNotObtained if another
	// owner holds the lock. When the servers cannot be reached or cannot
	// answer, it returns, within a bound its backend documents even if ctx
	// has no deadline, an error matching ErrUnavailable and not
	// ErrNotObtained: nobody knows whether the lock is held.
	TryLock(ctx context.Context) (Lease, error)
}

// A Lease is one holder's claim on a lock. Its methods are safe for
// concurrent use.
//
// A Lease can be lost at any time. Done is closed when the lease ends for
// any reason, and never later than Until; Err then says why.
type Lease interface {
	// Key returns the name of the lock, as given to the constructor that
	// made it (the lock's Name): not the key, path or row the backend
	// stores it under.
	Key() string

	// Token returns the random owner token that identifies this holder on
	// the server: at least 128 bits from crypto/rand, followed by "~" and
	// the label that the context of Lock or TryLock carried (WithLabel).
	Token() string

	// Fence returns the fencing token of this grant. It is strictly greater
	// than the fence of every earlier grant of the same Key.
	Fence() uint64

	// Until returns the conservative deadline of the lease on the local
	// monotonic clock: up to Until, no other holder can have been granted
	// the lock. It is never later than the moment the request that
	// acquired or last renewed the lease was sent, plus the TTL, less
	// Drift(TTL). When Lock or TryLock returns the lease, it is at least
	// a third of the lease time away (see Locker). Refresh and automatic
	// renewal move it forward.
	Until() time.Time

	// Done returns a channel that is closed when the lease ends: released,
	// lost, or expired. It is closed no later than Until, even when the
	// server cannot be reached.
	Done() <-chan struct{}

	// Err returns nil while the lease is held. After Done is closed it
	// returns ErrReleased if the holder released it, or an error matching
	// ErrLost that wraps the cause.
	Err() error

	// Context returns a context that is cancelled, with Err as its cause,
	// when Done is closed. It carries the lease's owner for reentrant
	// locks (see WithOwner).
	Context() context.Context

	// Refresh extends the lease to a full TTL from now. It returns an error
	// matching ErrLost if the lease had been lost, and ErrReleased if it
	// had been released.
	Refresh(ctx context.Context) error

	// Release gives the lock up. It is idempotent: releasing a released
	// lease returns nil. It returns an error matching ErrNotHeld (and
	// ErrLost) if the lease had already been lost.
	//
	// A Release that could not reach the servers, or got no answer from
	// them, does not know whether the lock was freed. It returns an error
	// matching ErrUnavailable, within the bound its backend documents
	// for TryLock (or by Until, if that is later), even if ctx has no
	// deadline. The lease ends all the same: Done is closed and Err
	// returns ErrReleased (or, if Until passed while the release was on
	// its way, the expiry's error, which Release's error then matches
	// too). The lock is freed on the servers no later than it would be
	// had the holder vanished: when the lease's TTL runs out after its
	// last renewal (for a ZooKeeper lock, when the session that holds it
	// ends), or sooner, by a retry the backend makes in the background.
	Release(ctx context.Context) error
}

// Drift returns the clock-drift allowance that every backend takes off a
// claim good for ttl on the server before it trusts the claim locally: 1%
// of ttl plus 2ms, as in the Redlock algorithm. It covers the local clock
// running slower than the server's, not a pause of either.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
