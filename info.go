package dlock

import "time"

// A Kind names the kind of lock that uses a name, as an Inspect reports
// it. Every backend uses these names.
type Kind string

// The kinds of lock an Inspect reports.
const (
	KindFree           Kind = "free"            // nothing holds the name
	KindMutex          Kind = "mutex"           // a Mutex (or a peer library's lock with the same layout)
	KindFairMutex      Kind = "fair-mutex"      // a FairMutex: a Mutex with a FIFO queue
	KindReentrantMutex Kind = "reentrant-mutex" // a ReentrantMutex
	KindRWMutex        Kind = "rwmutex"         // an RWMutex, held by readers or a writer
	KindSemaphore      Kind = "semaphore"       // a Semaphore, held by permits
	KindUnknown        Kind = "unknown"         // something dlock did not write; see Info.Detail
)

// The modes a Holder holds a lock in.
const (
	ModeExclusive = "exclusive" // a mutex of any kind
	ModeRead      = "read"      // an RWMutex's reader
	ModeWrite     = "write"     // an RWMutex's writer
	ModePermit    = "permit"    // one of a Semaphore's permits
)

// Info describes the lock on one name as an Inspect found it at one
// moment. A field a backend cannot know is left zero; each backend's
// Inspect says which.
type Info struct {
	Name    string   // the name given to Inspect
	Kind    Kind     // which kind of lock uses the name
	Holders []Holder // who holds it, in the order they were granted where the backend knows it

	// Waiters is how many wait for the lock, where the backend keeps
	// them in a queue it can count.
	Waiters int

	// TTL is the time left before the lock expires on the server if its
	// holders stop renewing it: 0 when it is free, or when its life is
	// that of a session rather than a time (ZooKeeper).
	TTL time.Duration

	// Fence is the latest fence granted for the name, so at least every
	// holder's; 0 if the backend cannot tell.
	Fence uint64

	// PermitLimit is a Semaphore's number of permits; 0 for other kinds.
	PermitLimit int

	// Detail says what was found when Kind is KindUnknown, for an
	// operator to judge.
	Detail string
}

// Held reports whether anyone holds the lock.
func (i Info) Held() bool { return len(i.Holders) > 0 }

// A Holder is one holder of a lock.
type Holder struct {
	// Owner is the holder's Lease.Token; for a reentrant mutex, the
	// SHA-1 of the token in hex, since the token itself would let whoever
	// reads it join the hold.
	Owner string

	// Mode is ModeExclusive, ModeRead, ModeWrite or ModePermit.
	Mode string

	// Label is what the holder said about itself with dlock.WithLabel
	// (dlock run: its host, process id and start time), or "".
	Label string

	// Holds is how many times the owner holds the lock: more than 1 only
	// for a reentrant mutex.
	Holds int

	// Fence is this holder's own fence, where the backend keeps one per
	// holder (ZooKeeper, PostgreSQL); 0 otherwise.
	Fence uint64

	// Where says where the backend keeps this hold, when that is more
	// than the name: a ZooKeeper node and the session that made it.
	Where string
}
