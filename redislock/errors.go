package redislock

import (
	"errors"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// ErrNotReentrant is returned by Mutex.Lock and Mutex.TryLock when ctx
// carries a lease (from Lease.Context) that already holds the same lock:
// waiting would deadlock. Use a ReentrantMutex for recursive locking. It is
// dlock.ErrNotReentrant.
var ErrNotReentrant = dlock.ErrNotReentrant

// ErrClosed is returned by every call on a closed Client, and is the cause
// wrapped in dlock.ErrLost for leases still held when it was closed.
// A Lock or TryLock that is under way when the Client is closed, or
// begins after, returns an error matching both ErrClosed and
// dlock.ErrNotObtained.
var ErrClosed = errors.New("redislock: client closed")

func init() { lease.RegisterCause(ErrClosed, "closed") }

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

var (
	acquireScript = redisscript.Acquire
	releaseScript = redisscript.Release
	refreshScript = redisscript.Refresh
)
