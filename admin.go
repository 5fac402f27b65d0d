package dlock

import "context"

// Admin is what every backend's Client offers beside making locks: a look
// at a lock, an operator's override, and closing the Client. Every
// *Client of this module's backends (redislock, redlock, zklock,
// etcdlock, pglock, mysqllock) is an Admin. A name is what the backend's
// locks are named by: a ZooKeeper path for zklock.
type Admin interface {
	// Inspect reports who holds the lock called name, and who waits for
	// it where the backend can count them, as it found them at one moment.
	Inspect(ctx context.Context, name string) (Info, error)

	// ForceUnlock removes every holder of the lock called name, whoever
	// they are, and reports whether anything was held. Holders learn of it
	// when their leases next renew, and end with ErrTakenOver or a
	// backend's own cause.
	ForceUnlock(ctx context.Context, name string) (bool, error)

	// Close gives back the locks the Client still holds and stops its
	// work. Calls on a closed Client return an error matching ErrClosed.
	Close() error
}
