package dlock

import (
	"errors"
	"fmt"
)

// Sentinel errors. Backends wrap them with %w; test with errors.Is.
var (
	// ErrNotObtained is returned by Locker.TryLock when another owner holds
	// the lock, and by Locker.Lock when its context is done or its retry
	// strategy gives up first.
	ErrNotObtained = errors.New("dlock: lock not obtained")

	// ErrNotHeld is returned by Lease.Release and Lease.Refresh when the
	// lock is no longer held by this lease's owner, and by reentrant locks
	// when an owner releases a hold it does not have.
	ErrNotHeld = errors.New("dlock: lock not held")

	// ErrLost is what Lease.Err returns, wrapping the cause, when a lease
	// ended without being released: it expired, the key was deleted or
	// taken over, or a renewal failed.
	ErrLost = errors.New("dlock: lock lost")

	// ErrReleased is what Lease.Err returns after a successful release.
	ErrReleased = errors.New("dlock: lock released")

	// ErrExpired is the cause wrapped in ErrLost when a lease reached its
	// Until deadline without a successful renewal.
	ErrExpired = errors.New("dlock: lease expired")

	// ErrMaxHold is the cause wrapped in ErrLost when a lease reached the
	// longest hold its lock allows (WithMaxHold in every backend): the
	// watchdog stopped renewing it and the lock was given back, however
	// busy its holder still was.
	ErrMaxHold = errors.New("dlock: lease reached its maximum hold time")

	// ErrTakenOver is the cause wrapped in ErrLost when the server reports
	// that the lock is no longer this lease's: its key was deleted, or it
	// expired and another owner took it.
	ErrTakenOver = errors.New("dlock: lock deleted or taken over by another owner")

	// ErrNotReentrant is returned by Lock and TryLock of a lock that is not
	// reentrant when ctx carries a lease (from Lease.Context) that already
	// holds the same lock: waiting for it would deadlock.
	ErrNotReentrant = errors.New("dlock: the lock is not reentrant and ctx already holds it")

	// ErrKindMismatch is matched, with ErrNotObtained, by the error of a
	// Lock or TryLock when the name is held by another kind of lock (a
	// FairMutex asked for a name a Mutex holds): one name serves one kind
	// of lock at a time. The error names both kinds. Lock returns it at
	// once, on every backend: it does not wait for a holder of another
	// kind, which may hand the name on to more holders of its own kind for
	// ever. Once the name is free, any kind may take it.
	ErrKindMismatch = errors.New("dlock: the name is held by another kind of lock")

	// ErrUpgrade is returned by the write side of a read-write lock when ctx
	// carries a read lease of the same lock: the writer would wait for that
	// reader, and the reader for the writer, for ever.
	ErrUpgrade = errors.New("dlock: cannot upgrade a read lock to a write lock; release the read lock first")

	// ErrClosed is returned, wrapped, by every backend's calls on a closed
	// Client, and is the cause wrapped in ErrLost for leases still held
	// when it was closed. A Lock or TryLock that is under way when the
	// Client is closed, or begins after, returns an error matching both
	// ErrClosed and ErrNotObtained. Each backend's ErrClosed is this value.
	ErrClosed = errors.New("dlock: client closed")
)

// NotObtained returns an error matching both ErrNotObtained and cause under
// errors.Is. Backends use it when a wait ends because its context is done.
func NotObtained(cause error) error {
	if cause == nil {
		return ErrNotObtained
	}
	return fmt.Errorf("%w: %w", ErrNotObtained, cause)
}

// Lost returns an error matching both ErrLost and cause under errors.Is.
func Lost(cause error) error {
	if cause == nil {
		return ErrLost
	}
	return fmt.Errorf("%w: %w", ErrLost, cause)
}
