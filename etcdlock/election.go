package etcdlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the Mutex called name, made with opts, and keeps its value
// in its own key, in place of its owner token, so the value goes with the
// key's etcd lease, as etcd's own concurrency.Election keeps it (the value
// is dlock's record of term, token and value, so the two do not
// interoperate). Observers watch the keys under name/, and read the oldest
// again at least every min(TTL/4, 1s). Campaigns are served in the order
// they began, as waiters of a Mutex are.
//
// Leader names a leader cut off from the cluster until the cluster expires
// its etcd lease and deletes its key: after the leader's Until by up to the
// drift allowance (dlock.Drift), the TTL's rounding up to whole seconds,
// and half a second (etcd looks for expired leases every 500ms; 83ms was
// measured at a TTL of 1s); and, when an etcd leader election happens
// meanwhile, by up to one more TTL, as a new etcd leader extends every
// lease to a full TTL. NewElection never fails: a bad name or option is
// reported by every call.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	err := m.lk.cfg.check()
	if nerr := checkName(name); nerr != nil {
		err = nerr
	}
	return election.New(election.Config{Name: name, Lock: m, Store: &electionStore{c: c, name: name},
		TTL: m.lk.cfg.ttl, Err: err})
}

type electionStore struct {
	c    *Client
	name string
}

func (s *electionStore) Publish(ctx context.Context, l dlock.Lease, r election.Record) error {
	h, ok := l.(*Lease)
	if !ok {
		return election.ErrNotHolder
	}
	resp, err := s.c.cli.Txn(ctx).If(h.IsOwner()).
		Then(clientv3.OpPut(h.EtcdKey(), r.String(), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return fmt.Errorf("etcdlock: publishing the leader of %q: %w", s.name, err)
	}
	if !resp.Succeeded {
		return election.ErrNotHolder
	}
	return nil
}

// Read reads the oldest key under name/: the holder's, with its record, or
// its bare owner token before it has published one.
func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if s.c.reg.Closed() {
		return election.Record{}, false, ErrClosed
	}
	// The keys of the lock "name/b" are under name/ too: the oldest of the
	// election's own shape is the leader's.
	resp, err := s.c.cli.Get(ctx, prefix(s.name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return election.Record{}, false, fmt.Errorf("etcdlock: reading the leader of %q: %w", s.name, err)
	}
	for _, kv := range resp.Kvs {
		if k, _ := parseKey(s.name, string(kv.Key)); k == kindOther {
			continue
		}
		if !strings.Contains(string(kv.Value), "\n") {
			return election.Record{}, false, nil
		}
		r, err := election.Parse(string(kv.Value))
		if err != nil {
			return election.Record{}, false, fmt.Errorf("etcdlock: election %q: key %s: %w", s.name, kv.Key, err)
		}
		return r, true, nil
	}
	return election.Record{}, false, nil
}

// Withdraw has nothing to do: the record went with the leader's key, and
// its deletion reaches the observers' watch.
func (s *electionStore) Withdraw(context.Context, election.Record) error { return nil }

// Changes watches the keys under name/.
func (s *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range s.c.cli.Watch(ctx, prefix(s.name), clientv3.WithPrefix()) {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// ownerOf returns the owner token a key's value holds: the value itself,
// or the token of the leader's record an election's leader wrote there.
func ownerOf(value []byte) string {
	if r, err := election.Parse(string(value)); err == nil {
		return r.Token
	}
	return string(value)
}
