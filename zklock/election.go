package zklock

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/go-zookeeper/zk"
)

// NewElection returns the election on path (see dlock.Election), with the
// same rules for paths as NewMutex. Its leader holds the Mutex on path,
// made with opts, and keeps its value in the data of its own ephemeral
// node, which goes with the leadership; observers watch the path's
// children and the leader's node, and read them again at least every
// min(TTL/4, 1s) in case the connection drops a watch. Campaigns are
// served in the order they began, as waiters of a Mutex are.
//
// Leader names a leader cut off from the ensemble until the ensemble
// expires its session, which deletes its node: the session timeout T after
// the ensemble last heard from it, at the session tracker's next tick. Its
// lease ends min(TTL, T/3) after its last confirmation, so Leader can name
// it for up to about T - min(TTL, T/3) plus a tick after its Until (2.1s
// measured with T = 3s and a TTL of 1s). NewElection never fails: a bad
// path or option is reported by every call.
func (s *Client) NewElection(path string, opts ...Option) dlock.Election {
	m := s.NewMutex(path, opts...)
	return election.New(election.Config{Name: path, Lock: m, Store: &electionStore{q: m.q},
		TTL: m.q.cfg.ttl, Err: m.q.err})
}

type electionStore struct{ q *queue }

func (e *electionStore) Publish(ctx context.Context, l dlock.Lease, r election.Record) error {
	h, ok := l.(*Lease)
	if !ok || l.Err() != nil {
		return election.ErrNotHolder
	}
	_, err := e.q.s.set(ctx, h.Path(), []byte(r.String()), -1)
	if errors.Is(err, zk.ErrNoNode) {
		return election.ErrNotHolder
	}
	if err != nil {
		return failure("publish the leader of", e.q.dir, "setting "+h.Path(), err)
	}
	return nil
}

// Read reads the data of the lowest child: the holder's record, or its
// bare owner token before it has published one.
func (e *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if err := e.q.check(ctx); err != nil {
		return election.Record{}, false, err
	}
	for {
		names, _, err := e.q.s.children(ctx, e.q.dir)
		if errors.Is(err, zk.ErrNoNode) {
			return election.Record{}, false, nil
		}
		if err != nil {
			return election.Record{}, false, failure("read the leader of", e.q.dir, "listing", err)
		}
		kids, err := e.q.parse(names)
		if err != nil {
			return election.Record{}, false, err
		}
		if len(kids) == 0 {
			return election.Record{}, false, nil
		}
		n, err := e.q.s.get(ctx, e.q.dir+"/"+kids[0].name)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the leader left between the two reads
		}
		if err != nil {
			return election.Record{}, false, failure("read the leader of", e.q.dir, "reading "+kids[0].name, err)
		}
		if !bytes.Contains(n.data, []byte("\n")) {
			return election.Record{}, false, nil // not published yet
		}
		r, err := election.Parse(string(n.data))
		if err != nil {
			return election.Record{}, false, fmt.Errorf("zklock: election %s: node %s: %w", e.q.dir, kids[0].name, err)
		}
		return r, true, nil
	}
}

// Withdraw has nothing to do: the record went with the leader's node,
// and its deletion fires the observers' watch.
func (e *electionStore) Withdraw(context.Context, election.Record) error { return nil }

// Changes watches the path's children, and the data of the lowest.
func (e *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for attempt := 1; ctx.Err() == nil; {
			children, data, err := e.watch(ctx)
			if err != nil {
				if pause(ctx, attempt) != nil {
					return
				}
				attempt++
				continue
			}
			attempt = 1
			select {
			case out <- struct{}{}:
			default:
			}
			select {
			case <-children:
			case <-data:
			case <-ctx.Done():
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// watch sets the watches of one round: on the children of the path (or
// its creation), and on the lowest child's data (nil if there is none).
func (e *electionStore) watch(ctx context.Context) (children, data <-chan zk.Event, err error) {
	names, _, children, err := e.q.s.childrenW(ctx, e.q.dir)
	if errors.Is(err, zk.ErrNoNode) {
		_, _, children, err = e.q.s.existsW(ctx, e.q.dir)
		return children, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	kids, err := e.q.parse(names)
	if err != nil || len(kids) == 0 {
		return children, nil, nil
	}
	_, _, data, err = e.q.s.existsW(ctx, e.q.dir+"/"+kids[0].name)
	if err != nil {
		return children, nil, nil
	}
	return children, data, nil
}
