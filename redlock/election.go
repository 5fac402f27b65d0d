package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the Redlock Mutex called name, made with opts, and writes
// its value next to the lock key on every node on which the key is its
// own, as dlock:{name}:leader, which expires one TTL after the leader stops
// writing it again (every TTL/3); publishing counts only on a majority.
// Leader reports the record that a majority of nodes holds next to a lock
// key of the same owner, and ErrNoLeader otherwise: a leader cut off from
// the nodes is named until its keys expire, a TTL after the nodes ran the
// last renewal that reached them. After the leader's Until, that is the
// drift allowance (dlock.Drift) plus the latency of its last renewal; when
// the cut came while a renewal was on its way, and the renewal reached the
// nodes but their answers were lost, up to a renewal period (TTL/3) and
// that renewal's latency more. Leader, and each read of an observer, waits
// for the nodes up to the TTL (or until its ctx ends), not the node
// timeout, since a read spends no lease's validity; it decides as soon as a
// majority agrees, so that a silent minority does not hold it up, and,
// once a majority has answered without agreeing, waits for the others as
// long again as that took (at least the node timeout). It returns
// ErrNoLeader only when the nodes that did not answer could not give a
// leader a majority; otherwise an error. Each
// change is published
// on every node, on the channel dlock:{name}:leader; an observer subscribes
// on every node (a pub/sub connection each) and reads the nodes again at
// least every min(TTL/4, 1s). Campaigns wait as Lock does, polling with the
// retry strategy: a campaign wins at most one retry sleep (500ms with
// DefaultRetry) after the leader resigns. NewElection never fails: a bad
// name or option is reported by every call.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	if m.cfg.bare {
		m.err = fmt.Errorf("redlock: WithBareKey: an election cannot use the bare-key layout (its record sits beside dlock's key); use it with NewMutex: %w", ErrBareKeyUnsupported)
	}
	s := &electionStore{c: c, name: name, lock: m.keys.lock, record: m.keys.lock + ":leader", channel: m.keys.lock + ":leader", ttl: m.ttl, wait: m.cfg.ttl}
	return election.New(election.Config{Name: name, Lock: m, Store: s, TTL: m.cfg.ttl, Republish: true, Err: m.err})
}

type electionStore struct {
	c                           *Client
	name, lock, record, channel string
	ttl                         string        // in milliseconds
	wait                        time.Duration // how long a read waits for the nodes: the TTL
}

// Publish writes r on every node on which the lock key is r's owner's,
// and counts on a majority.
func (s *electionStore) Publish(ctx context.Context, _ dlock.Lease, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	call := redisscript.ElectPublishCall{Lock: s.lock, Record: s.record, Token: r.Token, Value: r.String(), TTL: s.ttl, Channel: s.channel}.Call()
	replies := s.c.fanOut(ctx, call)
	ok, refused := 0, 0
	var errs []error
	for range s.c.nodes {
		rep := <-replies
		switch {
		case rep.res.Err != nil:
			errs = append(errs, &NodeError{Node: s.c.nodes[rep.node].name, Err: rep.res.Err})
		case rep.res.Val == int64(1):
			ok++
		default:
			refused++
		}
	}
	switch {
	case ok >= s.c.quorum:
		return nil
	case refused > len(s.c.nodes)-s.c.quorum:
		return election.ErrNotHolder
	}
	return errQuorum("publishing the leader", s.name, ok, s.c.quorum, len(s.c.nodes), errs)
}

// Read returns the record that a majority of nodes holds next to a lock
// key of its owner. It waits for the nodes up to the TTL, not the node
// timeout: the node timeout bounds what spends a lease's validity, and a
// read spends none, while its answers are still true when they come late
// (a loaded machine's nodes did not answer a new client's read in 250ms).
// It decides as soon as a majority agrees, or no longer can, so that nodes
// that are down or silent hold it up only when a majority is. Once a
// majority has answered without agreeing, the others have as long again as
// that took (at least the node timeout) to tip it: one silent node and two
// that disagree (a hand-over under way, a node restarted empty) held an
// observer's reads up for the TTL. It names no leader only when the nodes
// that did not answer could not make a majority for any record; otherwise
// it fails, since they may hold the leader.
func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if err := s.c.usable(); err != nil {
		return election.Record{}, false, err
	}
	n, quorum := len(s.c.nodes), s.c.quorum
	replies, f := s.c.fanOutFor(ctx, redisscript.ElectReadCall{Lock: s.lock, Record: s.record}.Call(), nil, max(s.wait, s.c.cfg.nodeTimeout))
	defer f.cancel() // the nodes left once it is decided
	start := time.Now()
	var late <-chan time.Time // set once a majority has answered
	answered, most := 0, 0
	votes := map[string]int{}
	var errs []error
	undecided := func(why string) error {
		err := fmt.Errorf("redlock: reading the leader of %q: %d of %d nodes answered, no record has a majority of %d among them, and the %d that did not answer %s could make one",
			s.name, answered, n, quorum, n-answered, why)
		if len(errs) == 0 {
			return err
		}
		return fmt.Errorf("%w: %w", err, errors.Join(errs...))
	}
	for got := 1; got <= n; got++ {
		var rep reply
		select {
		case rep = <-replies:
		case <-late:
			return election.Record{}, false, undecided(fmt.Sprintf("within %v", time.Since(start).Round(time.Millisecond)))
		}
		name := s.c.nodes[rep.node].name
		switch pair, _ := rep.res.Val.([]any); {
		case rep.res.Err != nil:
			errs = append(errs, &NodeError{Node: name, Err: rep.res.Err})
		case len(pair) != 2:
			errs = append(errs, &NodeError{Node: name, Err: fmt.Errorf("elect_read: unexpected reply %v", rep.res.Val)})
		default:
			answered++
			lock, _ := pair[0].(string)
			rec, _ := pair[1].(string)
			if r, err := election.Parse(rec); err == nil && (lock == r.Token || lock == r.Token+redisscript.WaiterMark) {
				votes[rec]++
				if votes[rec] >= quorum {
					return r, true, nil
				}
				most = max(most, votes[rec])
			}
		}
		switch {
		case answered+n-got < quorum:
			return election.Record{}, false, errQuorum("reading the leader", s.name, answered, quorum, n, errs)
		case most+n-answered < quorum:
			// Not even every node yet to answer, or that failed, could
			// give a record a majority: there is no leader.
			return election.Record{}, false, nil
		}
		if late == nil && answered >= quorum {
			t := time.NewTimer(max(s.c.cfg.nodeTimeout, time.Since(start)))
			defer t.Stop()
			late = t.C
		}
	}
	// Every node has answered or failed, and those that failed could have
	// given a record a majority.
	return election.Record{}, false, undecided("(they failed)")
}

// Withdraw deletes r on every node that has it, and tells observers.
func (s *electionStore) Withdraw(ctx context.Context, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	replies := s.c.fanOut(ctx, redisscript.ElectWithdrawCall{Record: s.record, Value: r.String(), Channel: s.channel}.Call())
	var errs []error
	for range s.c.nodes {
		if rep := <-replies; rep.res.Err != nil {
			errs = append(errs, &NodeError{Node: s.c.nodes[rep.node].name, Err: rep.res.Err})
		}
	}
	return errors.Join(errs...)
}

// Changes subscribes to the change channel on every node, each on a
// pub/sub connection of its own; a node that cannot be reached is left to
// the observer's poll.
func (s *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	if s.c.usable() != nil {
		return out, func() {}
	}
	notify := func(string) {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	listeners := make([]redisconn.Listener, len(s.c.nodes))
	for i, n := range s.c.nodes {
		listeners[i] = n.conn.Listen(notify)
		wg.Go(func() { listeners[i].Subscribe(ctx, s.channel) })
	}
	return out, func() {
		cancel()
		wg.Wait()
		for _, l := range listeners {
			l.Close()
		}
	}
}
