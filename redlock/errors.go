package redlock

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// A NodeError is the failure of one node in a quorum operation. Operations
// that fail on several nodes return their NodeErrors combined with
// errors.Join, so errors.As finds each one.
type NodeError struct {
	Node string // the node's address, or "node i" when the Conn does not say
	Err  error
}

// Error names the node and says what went wrong there.
func (e *NodeError) Error() string { return "redlock: node " + e.Node + ": " + e.Err.Error() }

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// ErrBareKeyUnsupported is matched by the error that every call of an
// election made WithBareKey returns: only a Mutex can use the bare-key
// layout.
var ErrBareKeyUnsupported = errors.New("redlock: this lock kind does not support WithBareKey")

// ErrClosed is dlock.ErrClosed: it is returned by every call on a closed
// Client, and is the cause wrapped in dlock.ErrLost for leases still held
// when it was closed. A Lock or TryLock that is under way when the Client
// is closed, or begins after, returns an error matching both ErrClosed and
// dlock.ErrNotObtained.
var ErrClosed = dlock.ErrClosed

// errQuorum describes an operation that reached fewer than a majority.
func errQuorum(op, key string, ok, quorum, n int, nodeErrs []error) error {
	msg := fmt.Errorf("redlock: %s of %q reached %d of %d nodes; a majority is %d", op, key, ok, n, quorum)
	if len(nodeErrs) == 0 {
		return msg
	}
	return fmt.Errorf("%w: %w", msg, errors.Join(nodeErrs...))
}
