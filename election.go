package dlock

import (
	"context"
	"errors"
)

// ErrNoLeader is returned by Election.Leader when no one leads the
// election: no campaign has won it, or the last leader resigned or lost its
// lease and no one has taken its place yet.
var ErrNoLeader = errors.New("dlock: the election has no leader")

// A Leader is one term of an election's leadership: the value its leader
// campaigned with, and the term's number.
type Leader struct {
	// Value is what the leader passed to Campaign, such as its address.
	Value string
	// Term is the fence of the leader's lease: it strictly increases from
	// one term to the next, so a resource that refuses a lower term than
	// one it has seen refuses a deposed leader.
	Term uint64
}

// An Election chooses one leader among the processes that campaign under
// one name. Each backend makes one with its Client's NewElection, taking
// the same options as its Mutex; the leader holds the Mutex of the
// election's name (Inspect shows it, ForceUnlock deposes it) and keeps its
// value next to it.
//
// An Election value campaigns for one leadership at a time; it is safe for
// concurrent use. Leader and Observe need no campaign: a process that only
// follows the leadership uses them alone.
type Election interface {
	// Name returns the election's name, as given to NewElection.
	Name() string

	// Campaign blocks until this process leads the election with value,
	// ctx is done or a hard error occurs. It returns the leadership as a
	// Lease: its Fence is the term, its Done closes when the leadership is
	// lost or resigned, and no later than its Until; its Release resigns.
	// When ctx is done first, the error matches both ErrNotObtained and
	// ctx.Err(). Campaign while this Election already leads returns an
	// error; Resign first.
	Campaign(ctx context.Context, value string) (Lease, error)

	// Resign gives up the leadership won by the last Campaign, so that
	// another campaign can win at once. It returns nil if this Election
	// does not lead, and an error matching ErrNotHeld if its leadership had
	// already been lost.
	Resign(ctx context.Context) error

	// Leader returns the current leader, or an error matching ErrNoLeader
	// when there is none.
	//
	// A leader that resigns, or whose lease ends while it can still reach
	// the servers, is no longer named once its Done has closed. A leader
	// cut off from the servers (a paused process, a partition) cannot take
	// its claim back: Leader names it until the servers expire the claim
	// by their own clocks, which can be later than the leader's Until,
	// when its Done closed. How much later is each backend's leader
	// horizon, stated in its NewElection documentation: the drift
	// allowance (Drift) and the latency of the leader's last renewal on
	// Redis, Redlock, PostgreSQL and MySQL, half a second more on etcd,
	// and most of the session timeout on ZooKeeper. Act
	// on a leader only with its term as a fence, as for any lease.
	Leader(ctx context.Context) (Leader, error)

	// Observe returns a channel that receives each new leader, in order:
	// terms strictly increase. A leader that was replaced before the
	// receiver read it is dropped for the newer one, so a slow receiver
	// sees the latest leader, never an older one after a newer. A vacancy
	// is not sent (Leader reports it). The channel is closed when ctx is
	// done. Changes are seen through the backend's notifications, with a
	// poll at most a second apart as a safety net; failed reads are retried
	// at the next poll.
	Observe(ctx context.Context) <-chan Leader
}
