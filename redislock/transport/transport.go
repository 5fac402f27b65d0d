// Package transport is the former home of package redisconn, kept so that
// code importing it still builds: every name here is an alias of, or the
// same value as, the name in redisconn.
//
// Deprecated: use package github.com/dlock-go/dlock/redisconn.
package transport

import (
	"time"

	"github.com/dlock-go/dlock/redisconn"
)

// Conn is redisconn.Conn.
//
// Deprecated: use redisconn.Conn.
type Conn = redisconn.Conn

// Listener is redisconn.Listener.
//
// Deprecated: use redisconn.Listener.
type Listener = redisconn.Listener

// Call is redisconn.Call.
//
// Deprecated: use redisconn.Call.
type Call = redisconn.Call

// Result is redisconn.Result.
//
// Deprecated: use redisconn.Result.
type Result = redisconn.Result

// Script is redisconn.Script.
//
// Deprecated: use redisconn.Script.
type Script = redisconn.Script

// ReplyError is redisconn.ReplyError.
//
// Deprecated: use redisconn.ReplyError.
type ReplyError = redisconn.ReplyError

// ErrUnusable is redisconn.ErrUnusable (the same value).
//
// Deprecated: use redisconn.ErrUnusable.
var ErrUnusable = redisconn.ErrUnusable

// NewScript calls redisconn.NewScript.
//
// Deprecated: use redisconn.NewScript.
func NewScript(name, src string) *Script { return redisconn.NewScript(name, src) }

// WaitMillis calls redisconn.WaitMillis.
//
// Deprecated: use redisconn.WaitMillis.
func WaitMillis(d time.Duration) int64 { return redisconn.WaitMillis(d) }
