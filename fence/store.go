package fence

import (
	"context"
	"sync"

	"github.com/dlock-go/dlock"
)

// A Store keeps the highest fence accepted for each resource, for Handler.
// NewMemory, (*Redis).Store and (*SQL).Store return one; a Store of one's
// own must be safe for concurrent use.
type Store interface {
	// Advance records fence as the highest accepted for resource, unless
	// a higher one is recorded: then it records nothing and returns a
	// *StaleError. An equal fence is accepted. The check and the record
	// are one atomic step: of two concurrent calls, the lower fence never
	// wins after the higher one has been accepted.
	Advance(ctx context.Context, resource string, fence uint64) error
}

// NewMemory returns a Store that keeps its fences in this process's
// memory: right for a service with one instance, and lost when it
// restarts (which a restart of the service makes safe only if the lock
// it guards is also held across it; otherwise use an SQL store, or a
// Redis one on a server that writes every write to disk before it
// answers, which NewRedis checks).
// It keeps one entry per resource it has seen. Of the options, it takes
// WithObserver and WithMaxJump.
func NewMemory(opts ...Option) Store {
	c := newConfig(opts)
	return &memory{newest: map[string]uint64{}, observer: c.observer, maxJump: c.maxJump}
}

type memory struct {
	observer dlock.Observer
	maxJump  uint64
	mu       sync.Mutex
	newest   map[string]uint64
}

func (m *memory) Advance(_ context.Context, resource string, fence uint64) error {
	if err := checkInput(resource, fence, maxResource); err != nil {
		return err
	}
	m.mu.Lock()
	var err error
	if newest := m.newest[resource]; newest > fence {
		err = &StaleError{Resource: resource, Fence: fence, Newest: newest}
	} else if tooHigh(fence, newest, m.maxJump) {
		err = &TooHighError{Resource: resource, Fence: fence, Newest: newest, MaxJump: m.maxJump}
	} else {
		m.newest[resource] = fence
	}
	m.mu.Unlock()
	observe(m.observer, "Memory", resource, fence, err)
	return err
}
