// Package redisconn is the interface between dlock's Redis packages
// (redislock, redlock, and fence's Redis guard) and a Redis client
// library: a Conn runs Lua scripts and opens the pub/sub connection on
// which release notices arrive. Packages redislock/goredisconn and
// redislock/rueidisconn implement it for go-redis and rueidis; a user needs
// this package only to write a Conn of their own, or to wrap one (to count
// or delay commands).
package redisconn

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"time"
)

// A Conn is the transport to one Redis deployment (standalone, Sentinel or
// Cluster). dlock ships two: goredisconn for go-redis v9 and rueidisconn for
// rueidis. Implementations must be safe for concurrent use.
type Conn interface {
	// Eval runs each call's script and stores its outcome in the result of
	// the same index. It sends all calls in one pipelined round trip (per
	// Cluster node), by EVALSHA, and re-sends by EVAL those that failed with
	// NOSCRIPT. An integer reply is an int64, a bulk or status reply a
	// string, an array a []any, and a nil reply nil. A reply that is an
	// error from the server is a *ReplyError.
	Eval(ctx context.Context, calls []Call, results []Result)

	// Listen opens the connection on which release notices arrive. It calls
	// onMessage, from one goroutine, for every message published on a
	// subscribed channel. Opening may be lazy: the first network traffic
	// can be the first Subscribe.
	Listen(onMessage func(channel string)) Listener
}

// A Listener is one pub/sub connection. Implementations resubscribe after a
// reconnect; messages published meanwhile may be lost.
type Listener interface {
	// Subscribe subscribes to channel and returns when the server has
	// confirmed it, or ctx is done.
	Subscribe(ctx context.Context, channel string) error
	// Unsubscribe ends the subscription to channel.
	Unsubscribe(ctx context.Context, channel string) error
	// Close closes the connection.
	Close() error
}

// A Call is one script invocation.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string

	// WaitReplicas, when positive, asks the Conn to follow the script, on
	// the same connection and in the same round trip, with WAIT
	// WaitReplicas WaitTimeout, and to store WAIT's reply in
	// Result.Replicas. WAIT only counts the writes made on its own
	// connection, so it cannot be sent separately.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// WaitMillis returns a WAIT timeout in whole milliseconds, rounded up:
// WAIT with 0 would block for ever.
func WaitMillis(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}

// A Result is the outcome of one Call.
type Result struct {
	Val any
	Err error
	// Replicas is the number of replicas that acknowledged the script's
	// writes, when the Call asked for WAIT; -1 if WAIT itself failed.
	Replicas int64
}

// A Script is a Lua script with its SHA-1 digest. A Conn runs it with
// EVALSHA and, when the server answers NOSCRIPT, with EVAL of Src.
type Script struct {
	Name string // the file it came from, for error messages
	Src  string // the Lua source
	SHA1 string // the hex SHA-1 digest of Src, as EVALSHA takes it
}

// NewScript returns a Script for src.
func NewScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Src: src, SHA1: hex.EncodeToString(sum[:])}
}

// ErrUnusable is matched by the error of a call made through a Conn that
// has no usable Redis client: it was given none, or the client has been
// closed (go-redis's redis.ErrClosed). Waiting does not heal it, unlike a
// connection that failed. A Conn wraps it around its own error.
var ErrUnusable = errors.New("redisconn: no usable Redis client")

// A ReplyError is an error reply from the server, as opposed to a failure
// to reach it: a Conn returns the server's error replies as *ReplyError,
// with the server's text in Msg, so that redislock can tell a refusal
// (which no retry fixes) from a transport failure.
type ReplyError struct{ Msg string }

func (e *ReplyError) Error() string { return e.Msg }
