package zklock

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"syscall"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

var (
	// ErrClosed is dlock.ErrClosed: it is returned by every call on a closed
	// Client, and is the cause wrapped in dlock.ErrLost for leases still held
	// when it was closed. A Lock or TryLock that is under way when the Client
	// is closed, or begins after, returns an error matching both ErrClosed and
	// dlock.ErrNotObtained.
	ErrClosed = dlock.ErrClosed

	// ErrSessionExpired is the cause wrapped in dlock.ErrLost when the
	// ZooKeeper ensemble expired the session that held a lease: every
	// ephemeral node of the session, and so every lock it held, is gone. It
	// is zk.ErrSessionExpired.
	ErrSessionExpired = zk.ErrSessionExpired

	// ErrNotReentrant is dlock.ErrNotReentrant: a Mutex or an RWMutex
	// side asked again through the Context of one of its own leases.
	ErrNotReentrant = dlock.ErrNotReentrant

	// ErrKindMismatch is dlock.ErrKindMismatch: the path is used by another
	// kind of lock. Lock and TryLock return at once an error matching it
	// and dlock.ErrNotObtained, naming both kinds, when another kind's node
	// holds the path; and an error matching it when ctx carries a lease of
	// another kind on the same path (re-entry takes another hold only of a
	// lock of the same kind).
	ErrKindMismatch = dlock.ErrKindMismatch

	// ErrUpgrade is dlock.ErrUpgrade: the write side of an RWMutex asked
	// through the Context of a read lease of the same RWMutex.
	ErrUpgrade = dlock.ErrUpgrade

	// ErrPathACL is matched by the error of a Lock or TryLock, of a Client
	// made with WithDigestAuth or WithACL, on a lock path whose ACL lets
	// someone outside the Client's ACL create, delete or administer its
	// children: they could delete the holder's node and take the lock.
	// The error names the path and who. See "Security" in the package doc.
	ErrPathACL = errors.New("zklock: the lock path's ACL lets others delete its nodes")
)

func init() {
	lease.RegisterCause(ErrSessionExpired, "session_expired")
}

// transient reports whether err is a failure of the connection rather
// than an answer from the ensemble: the request may or may not have been
// carried out, and the client is reconnecting. go-zookeeper fails the
// requests under way with its own error, or with the socket's (a reset, a
// broken pipe) when a write fails.
func transient(err error) bool {
	var op *net.OpError
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.As(err, &op) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// describe turns a failed ZooKeeper call on path into an error that says
// what to do about it.
func describe(op, path string, err error) error {
	switch {
	case errors.Is(err, zk.ErrClosing):
		return ErrClosed
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("zklock: %s %s: %w (the node's ACL refuses this session; connect with WithDigestAuth as a user the ACL names)", op, path, err)
	case errors.Is(err, zk.ErrInvalidACL):
		return fmt.Errorf("zklock: %s %s: %w (check WithACL: a digest ACL needs its user's password hash, an auth ACL an authenticated session)", op, path, err)
	case errors.Is(err, zk.ErrNoChildrenForEphemerals):
		return fmt.Errorf("zklock: %s %s: %w (a parent of the lock path is an ephemeral node; lock under a persistent path)", op, path, err)
	}
	return fmt.Errorf("zklock: %s %s: %w", op, path, err)
}

// kindMismatch is the error of a Lock or TryLock of a want-kind lock on
// dir whose ctx carries the owner of n, a node of another kind on dir: it
// matches dlock.ErrNotObtained and dlock.ErrKindMismatch, as the refusal
// of a path held by another kind does.
func kindMismatch(dir string, want kind, n *node) error {
	held := n.q.kind.String()
	n.mu.Lock()
	if n.read && n.q.kind == kindWrite {
		held = "RWMutex reader (a downgraded writer)"
	}
	n.mu.Unlock()
	return dlock.NotObtained(fmt.Errorf("zklock: ctx carries a %s lease of %s (node %s); a %s cannot re-enter it: %w",
		held, dir, path.Base(n.path), want, dlock.ErrKindMismatch))
}
