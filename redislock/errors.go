package redislock

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotReentrant is returned by Mutex.Lock and Mutex.TryLock when ctx
// carries a lease (from Lease.Context) that already holds the same lock:
// waiting would deadlock. Use a ReentrantMutex for recursive locking.
var ErrNotReentrant = errors.New("redislock: Mutex is not reentrant and ctx already holds this lock")

// ErrClosed is returned by every call on a closed Client, and is the cause
// wrapped in dlock.ErrLost for leases still held when it was closed.
var ErrClosed = errors.New("redislock: client closed")

// describe turns a server reply error into one that names the problem.
func describe(key string, s *Script, err error) error {
	var re *ReplyError
	if !errors.As(err, &re) {
		return fmt.Errorf("redislock: %s on %q: %w", strings.TrimSuffix(s.Name, ".lua"), key, err)
	}
	msg := re.Msg
	switch {
	case strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("redislock: key %q holds a value of another Redis type (WRONGTYPE); pick another lock name or delete the key: %w", key, err)
	case strings.Contains(msg, "DLOCKNOTTL"):
		return fmt.Errorf("redislock: key %q exists without an expiry, so it was not set by dlock; pick another lock name or delete the key: %w", key, err)
	case strings.Contains(msg, "DLOCKFENCE"):
		return fmt.Errorf("redislock: the fence counter of %q does not hold a number; something other than dlock wrote it: %w", key, err)
	case strings.Contains(msg, "NOPERM") || strings.Contains(msg, "unknown command") ||
		strings.Contains(msg, "NOSCRIPT") || strings.Contains(msg, "scripting"):
		return fmt.Errorf("redislock: the server refused to run a Lua script (%s); dlock needs EVALSHA and EVAL to be allowed: %w", msg, err)
	}
	return fmt.Errorf("redislock: %s on %q: server replied: %w", strings.TrimSuffix(s.Name, ".lua"), key, err)
}

// isReply reports whether err is an error reply from the server rather than
// a transport failure.
func isReply(err error) bool {
	var re *ReplyError
	return errors.As(err, &re)
}
