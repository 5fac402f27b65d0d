package redislock

import (
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// ErrNotReentrant is returned by Mutex.Lock and Mutex.TryLock when ctx
// carries a lease (from Lease.Context) that already holds the same lock:
// waiting would deadlock. Use a ReentrantMutex for recursive locking. It is
// dlock.ErrNotReentrant.
var ErrNotReentrant = dlock.ErrNotReentrant

// ErrClosed is dlock.ErrClosed: it is returned by every call on a closed
// Client, and is the cause wrapped in dlock.ErrLost for leases still held
// when it was closed. A Lock or TryLock that is under way when the Client
// is closed, or begins after, returns an error matching both ErrClosed and
// dlock.ErrNotObtained.
var ErrClosed = dlock.ErrClosed

// ErrBareKeyUnsupported is matched by the error that every call of a lock
// made WithBareKey returns when its kind cannot use the bare-key layout:
// FairMutex, ReentrantMutex, RWMutex, Semaphore and NewElection's.
var ErrBareKeyUnsupported = errors.New("redislock: this lock kind does not support WithBareKey")

// describe turns a script failure into an error that names the problem.
func describe(key string, s *redisscript.Script, err error) error {
	return redisscript.Describe("redislock", key, s, err)
}

// isReply reports whether err is an error reply from the server rather than
// a transport failure.
func isReply(err error) bool { return redisscript.IsReply(err) }

// mayHaveRun reports whether a call that failed with err may have run on
// the server, so that what it may have taken must be given back: not if
// the server refused it with an error reply, nor if no connection could
// even be made (scripts are never retried by the transport, so a dial
// error means nothing was sent).
func mayHaveRun(err error) bool { return !isReply(err) && !redisscript.Unsent(err) }

// turnedAway reports whether err is the reply of a server that cannot
// serve calls for a while (LOADING, BUSY, a failover under way, ...; see
// redisscript.TurnedAway): the call did not run, and the same call sent
// later may. A release, a renewal or a clean-up so refused is unfinished
// business, as one that could not reach the server is, not an answer.
func turnedAway(err error) bool { return redisscript.TurnedAway(err) }

// unfinished reports whether a release that failed with err must be sent
// again, in the background (see Client.abandon): it may have run, or was
// turned away for now.
func unfinished(err error) bool { return mayHaveRun(err) || turnedAway(err) }

var (
	acquireScript = redisscript.Acquire
	releaseScript = redisscript.Release
	refreshScript = redisscript.Refresh
)
