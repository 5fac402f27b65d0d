package etcdlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrClosed is dlock.ErrClosed: it is returned by every call on a closed
	// Client, and is the cause wrapped in dlock.ErrLost for leases still held
	// when it was closed. A Lock or TryLock that is under way when the Client
	// is closed, or begins after, returns an error matching both ErrClosed and
	// dlock.ErrNotObtained.
	ErrClosed = dlock.ErrClosed

	// ErrLeaseNotFound is the cause wrapped in dlock.ErrLost when etcd no
	// longer knows a lease's etcd lease: it expired on the server (the
	// client could not renew it in time) or was revoked. Every key of the
	// lease went with it.
	ErrLeaseNotFound = errors.New("etcdlock: etcd lease not found (expired on the server or revoked)")

	// ErrNotReentrant is dlock.ErrNotReentrant: a Mutex or an RWMutex
	// side asked again through the Context of one of its own leases.
	ErrNotReentrant = dlock.ErrNotReentrant

	// ErrKindMismatch is dlock.ErrKindMismatch: the name is used by
	// another kind of lock. TryLock and Lock return at once an error
	// matching it and dlock.ErrNotObtained, naming both kinds, when the
	// holder is of another kind; Lock does not wait for it.
	ErrKindMismatch = dlock.ErrKindMismatch

	// ErrUpgrade is dlock.ErrUpgrade: the write side of an RWMutex asked
	// through the Context of a read lease of the same RWMutex.
	ErrUpgrade = dlock.ErrUpgrade
)

func init() {
	lease.RegisterCause(ErrLeaseNotFound, "lease_not_found")
}

// leaseNotFound reports whether err is etcd's answer for an unknown lease.
func leaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// transient reports whether err may go away if the request is made again,
// perhaps through another endpoint: no answer in time, no connection, no
// leader, an election.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	switch rpctypes.Error(err) {
	case rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrNotCapable, rpctypes.ErrStopped,
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrUnhealthy, rpctypes.ErrTooManyRequests:
		return true
	}
	return false
}

// failed describes a failed etcd request made for what on the lock name:
// an ended ctx (see ended) gives an error matching dlock.ErrNotObtained
// and ctx.Err().
func failed(ctx context.Context, what, name string, err error) error {
	if cause := ended(ctx); cause != nil {
		return dlock.NotObtained(cause)
	}
	return fmt.Errorf("etcdlock: %s %q: %w", what, name, err)
}
