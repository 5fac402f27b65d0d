// Package election is the one implementation of dlock.Election that every
// backend shares. A backend supplies a Store: the election's lock, and where
// the leader's record lives next to it.
package election

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// A Record is what a leader publishes: its lease's token (which ties the
// record to the lock's current holder), its term and its value.
type Record struct {
	Token string
	Term  uint64
	Value string
}

// String encodes r for a backend that keeps it as one string.
func (r Record) String() string {
	return strconv.FormatUint(r.Term, 10) + "\n" + r.Token + "\n" + r.Value
}

// Parse decodes a Record written by String.
func Parse(s string) (Record, error) {
	term, rest, ok1 := strings.Cut(s, "\n")
	token, value, ok2 := strings.Cut(rest, "\n")
	n, err := strconv.ParseUint(term, 10, 64)
	if !ok1 || !ok2 || err != nil || token == "" {
		return Record{}, fmt.Errorf("malformed leader record %.40q", s)
	}
	return Record{Token: token, Term: n, Value: value}, nil
}

// ErrNotHolder is what Store.Publish returns when the lease no longer
// holds the election's lock.
var ErrNotHolder = errors.New("the lease no longer holds the election's lock")

// A Store is a backend's part of an election.
type Store interface {
	// Publish records r as the leader's while lease (whose token r
	// carries) holds the lock, and notifies observers; it returns
	// ErrNotHolder if the lease no longer holds it. A record that needs
	// republishing (Config.Republish) lives for the lock's TTL.
	Publish(ctx context.Context, lease dlock.Lease, r Record) error
	// Read returns the record of the lock's current holder, and false when
	// the lock is free or its holder has published no record.
	Read(ctx context.Context) (Record, bool, error)
	// Withdraw deletes r if it is still the record, and notifies
	// observers either way.
	Withdraw(ctx context.Context, r Record) error
	// Changes returns a channel that receives a value when the record may
	// have changed, and a function that stops it. Notices may be missed;
	// observers also poll.
	Changes(ctx context.Context) (<-chan struct{}, func())
}

// Config describes one election.
type Config struct {
	Name  string
	Lock  dlock.Locker
	Store Store
	// Acquire, if not nil, is how Campaign takes Lock: a backend whose
	// lock keys carry the campaign's value from the start (etcd, as
	// concurrency.Election does) takes it with the value.
	Acquire func(ctx context.Context, value string) (dlock.Lease, error)
	// TTL is the lock's TTL: the observers' poll and the republishing
	// period follow from it.
	TTL time.Duration
	// Republish asks for the record to be published again every TTL/3
	// while the lease holds: the record expires with its TTL (Redis).
	Republish bool
	// Err, if not nil, is returned by every call: a bad name or option.
	Err error
}

// An Election implements dlock.Election over a Config.
type Election struct {
	cfg Config

	mu          sync.Mutex
	lease       *leadership // the last campaign's, nil before the first
	campaigning bool        // a Campaign is running
}

var _ dlock.Election = (*Election)(nil)

// New returns the election cfg describes.
func New(cfg Config) *Election { return &Election{cfg: cfg} }

// MaxPoll is the longest time between two reads of an observer.
const MaxPoll = time.Second

// Poll returns how often an observer of an election with the given TTL
// reads the record when no notice comes: a quarter of the TTL, at most
// MaxPoll.
func Poll(ttl time.Duration) time.Duration {
	return max(min(ttl/4, MaxPoll), 5*time.Millisecond)
}

// Name returns the election's name.
func (e *Election) Name() string { return e.cfg.Name }

// Campaign blocks until it holds the lock and has published value.
func (e *Election) Campaign(ctx context.Context, value string) (dlock.Lease, error) {
	if e.cfg.Err != nil {
		return nil, e.cfg.Err
	}
	e.mu.Lock()
	switch {
	case e.campaigning:
		e.mu.Unlock()
		return nil, fmt.Errorf("dlock: election %q: Campaign while another Campaign of the same Election runs; one Election campaigns once at a time", e.cfg.Name)
	case e.lease != nil && e.lease.Err() == nil:
		e.mu.Unlock()
		return nil, fmt.Errorf("dlock: election %q: Campaign of an election that leads already (term %d); Resign first", e.cfg.Name, e.lease.Fence())
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()
	acquire := e.cfg.Acquire
	if acquire == nil {
		acquire = func(ctx context.Context, _ string) (dlock.Lease, error) { return e.cfg.Lock.Lock(ctx) }
	}
	for {
		l, err := acquire(ctx, value)
		if err != nil {
			return nil, err
		}
		r := Record{Token: l.Token(), Term: l.Fence(), Value: value}
		err = e.cfg.Store.Publish(ctx, l, r)
		if errors.Is(err, ErrNotHolder) {
			l.Release(context.WithoutCancel(ctx)) // lost already: try again
			continue
		}
		if err != nil {
			l.Release(context.WithoutCancel(ctx))
			if ctx.Err() != nil {
				return nil, dlock.NotObtained(ctx.Err())
			}
			return nil, fmt.Errorf("dlock: election %q: publishing the leader's value: %w", e.cfg.Name, err)
		}
		ld := &leadership{Lease: l, store: e.cfg.Store, rec: r}
		e.mu.Lock()
		e.lease = ld
		e.mu.Unlock()
		if e.cfg.Republish {
			go e.republish(ld)
		}
		return ld, nil
	}
}

// republish keeps the record of ld alive while ld holds the lock.
func (e *Election) republish(ld *leadership) {
	t := time.NewTicker(e.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ld.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(ld.Context(), e.cfg.TTL/3)
			err := e.cfg.Store.Publish(ctx, ld.Lease, ld.rec)
			cancel()
			if errors.Is(err, ErrNotHolder) {
				return // the lease's own renewal reports the loss
			}
		}
	}
}

// Resign releases the last campaign's leadership.
func (e *Election) Resign(ctx context.Context) error {
	if e.cfg.Err != nil {
		return e.cfg.Err
	}
	e.mu.Lock()
	ld := e.lease
	e.mu.Unlock()
	if ld == nil {
		return nil
	}
	return ld.Release(ctx)
}

// Leader reads the current leader.
func (e *Election) Leader(ctx context.Context) (dlock.Leader, error) {
	if e.cfg.Err != nil {
		return dlock.Leader{}, e.cfg.Err
	}
	r, ok, err := e.cfg.Store.Read(ctx)
	if err != nil {
		return dlock.Leader{}, fmt.Errorf("dlock: election %q: reading the leader: %w", e.cfg.Name, err)
	}
	if !ok {
		return dlock.Leader{}, fmt.Errorf("dlock: election %q: %w", e.cfg.Name, dlock.ErrNoLeader)
	}
	return dlock.Leader{Value: r.Value, Term: r.Term}, nil
}

// Observe sends each new leader on the returned channel, in term order,
// replacing one that was not received yet by a newer one.
func (e *Election) Observe(ctx context.Context) <-chan dlock.Leader {
	out := make(chan dlock.Leader)
	if e.cfg.Err != nil {
		go func() { <-ctx.Done(); close(out) }()
		return out
	}
	go func() {
		defer close(out)
		changes, stop := e.cfg.Store.Changes(ctx)
		defer stop()
		poll := time.NewTimer(0)
		defer poll.Stop()
		var last uint64
		var pending *dlock.Leader
		for {
			var send chan<- dlock.Leader
			var next dlock.Leader
			if pending != nil {
				send, next = out, *pending
			}
			read := false
			select {
			case <-ctx.Done():
				return
			case send <- next:
				pending = nil
			case <-changes:
				read = true
			case <-poll.C:
				read = true
				poll.Reset(Poll(e.cfg.TTL))
			}
			if !read {
				continue
			}
			r, ok, err := e.cfg.Store.Read(ctx)
			if err == nil && ok && r.Term > last {
				last = r.Term
				pending = &dlock.Leader{Value: r.Value, Term: r.Term}
			}
		}
	}()
	return out
}

// A leadership is the lease Campaign returns: the lock's lease, whose
// Release also withdraws the record.
type leadership struct {
	dlock.Lease
	store Store
	rec   Record
}

// Release resigns: it releases the lock, then withdraws the record so that
// observers hear of it at once.
func (l *leadership) Release(ctx context.Context) error {
	err := l.Lease.Release(ctx)
	// Once the lock is free the record is stale whatever happens to it:
	// withdrawing it only tells observers sooner.
	l.store.Withdraw(ctx, l.rec)
	return err
}
