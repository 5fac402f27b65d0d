package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/dlock-go/dlock/internal/lease"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the Mutex called name, made with opts, and its keys are
// those of etcd's own concurrency.Election on the prefix name: each
// candidate's key, name/<lease ID in hex>, holds the value it campaigns
// with from the moment it is queued, and the key with the lowest create
// revision leads; the term is that create revision. So the two are one
// election: each waits for the other's older keys, Leader and Observe name
// the other's leader, with its value, and a resignation on either side
// hands over to the next candidate of either (see Elections with
// concurrency.Election in the package doc). Observers watch the keys
// under name/, and read the oldest again at least every min(TTL/4, 1s).
// Campaigns are served in the order they began, as waiters of a Mutex are.
//
// Leader names a leader cut off from the cluster until the cluster expires
// its etcd lease and deletes its key: after the leader's Until by up to the
// drift allowance (dlock.Drift), the TTL's rounding up to whole seconds,
// and half a second (etcd looks for expired leases every 500ms; 83ms was
// measured at a TTL of 1s); and, when an etcd leader election happens
// meanwhile, by up to one more TTL, as a new etcd leader extends every
// lease to a full TTL. Leader, and each read of an observer, makes its
// request again through the next endpoint as a Lock does, and returns an
// error matching dlock.ErrUnavailable when the cluster has not answered
// within TryLock's bound (see Faults in the package doc), whatever its
// ctx; an observer cut off from the cluster names the leader of the moment
// once it can read again. NewElection never fails: a bad name or option is
// reported by every call.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	err := m.lk.cfg.check()
	if nerr := checkName(name); nerr != nil {
		err = nerr
	}
	return election.New(election.Config{Name: name, Lock: m, Store: &electionStore{c: c, name: name, lk: m.lk},
		TTL: m.lk.cfg.ttl, Err: err, Acquire: m.campaign})
}

// campaign is Lock, with value in the key in place of the owner token.
func (m *Mutex) campaign(ctx context.Context, value string) (dlock.Lease, error) {
	a := m.lk.ev.Begin(ctx)
	return a.End(m.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) {
		return m.lk.acquireWith(ctx, &call{value: &value}, &a)
	}))
}

type electionStore struct {
	c    *Client
	name string
	lk   *locker // the election's Mutex's
}

// Publish checks that the leader's key, which holds its value since it
// was queued, still holds the lock. A value with the shape of an owner
// token it writes again, so that the key's version tells it from a token
// (see leaderValue). The check reads: etcd answers a transaction of
// compares alone from the member's own state, which may be stale. Its
// request is made again, as a Lock's are, while the cluster fails and the
// lease lasts.
func (s *electionStore) Publish(ctx context.Context, l dlock.Lease, r election.Record) error {
	h, ok := l.(*Lease)
	if !ok {
		return election.ErrNotHolder
	}
	then := clientv3.OpGet(h.EtcdKey(), clientv3.WithCountOnly())
	if lease.IsToken(r.Value) {
		then = clientv3.OpPut(h.EtcdKey(), r.Value, clientv3.WithIgnoreLease())
	}
	// The lease's end (its loss, or the Client's Close) ends the attempts.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.Context(), cancel)()
	var resp *clientv3.TxnResponse
	err := h.g.lk.retry(pctx, &call{}, func(actx context.Context) (err error) {
		resp, err = s.c.cli.Txn(actx).If(h.IsOwner()).Then(then).Commit()
		return err
	})
	if err != nil && ctx.Err() == nil && h.Err() != nil {
		return election.ErrNotHolder
	}
	if err != nil {
		return fmt.Errorf("etcdlock: publishing the leader of %q: %w", s.name, err)
	}
	if !resp.Succeeded {
		return election.ErrNotHolder
	}
	return nil
}

// Read reads the oldest key under name/, as concurrency.Election.Leader
// does: its value is the leader's, its create revision the term (see
// leaderValue). Unlike concurrency.Election's, it names no leader when
// that key is not a candidate's, name/<lease ID in hex>: a key of another
// kind of lock is no leader, and one of another name below this one
// (name/sub/<lease ID>, an election called name/sub) gives an error
// matching ErrKindMismatch, as it does a Campaign.
func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if s.c.reg.Closed() {
		return election.Record{}, false, ErrClosed
	}
	// Each request is an attempt, made again through the next endpoint
	// (see retry): a member that stopped answering, or a connection whose
	// requests were lost, holds a read up for one attempt, not for ever.
	// A cluster that does not answer fails it after TryLock's bound.
	// The keys of the lock "name/b" are under name/ too: the oldest of the
	// election's own shape is the leader's.
	rctx, cancel := context.WithTimeoutCause(ctx, tryTimeout(s.lk.cfg.ttl), errTryBound)
	defer cancel()
	cl := &call{}
	start := time.Now()
	var resp *clientv3.GetResponse
	err := s.lk.retry(rctx, cl, func(actx context.Context) (err error) {
		resp, err = s.c.cli.Get(actx, prefix(s.name), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		return err
	})
	if err != nil {
		if ended(ctx) != nil {
			return election.Record{}, false, fmt.Errorf("etcdlock: reading the leader of %q: %w", s.name, context.Cause(ctx))
		}
		if ended(rctx) != nil || errors.Is(err, dlock.ErrUnavailable) {
			o := cl.outage()
			if !o.open() {
				o = outage{since: start, last: noAnswer(time.Since(start))}
			}
			err = s.c.unavailable(o)
		}
		return election.Record{}, false, fmt.Errorf("etcdlock: reading the leader of %q: %w", s.name, err)
	}
	for _, kv := range resp.Kvs {
		switch k, _ := parseKey(s.name, string(kv.Key)); k {
		case kindOther: // name/sub/<lease>, say: a key of another lock or election
			continue
		case kindMutex:
		default: // another kind of lock holds the name
			return election.Record{}, false, nil
		}
		value, ok := leaderValue(kv)
		if !ok {
			return election.Record{}, false, nil
		}
		return election.Record{Term: uint64(kv.CreateRevision), Value: value}, true, nil
	}
	return election.Record{}, false, nil
}

// Withdraw has nothing to do: the value went with the leader's key, and
// its deletion reaches the observers' watch.
func (s *electionStore) Withdraw(context.Context, election.Record) error { return nil }

// Changes watches the keys under name/, and watches again when the watch
// ends: the member it was on lost its leader (a watch that requires one
// is then cancelled), or the client closed it. It notices a change then,
// as one may have been missed, and watches again after 10ms, doubling to
// the observers' poll while watches keep ending.
func (s *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	notify := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll := election.Poll(s.lk.cfg.ttl)
		wait := 10 * time.Millisecond
		for {
			start := time.Now()
			for range s.c.cli.Watch(clientv3.WithRequireLeader(ctx), prefix(s.name), clientv3.WithPrefix()) {
				notify()
			}
			if ctx.Err() != nil {
				return
			}
			notify()
			if time.Since(start) > poll {
				wait = 10 * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, poll)
		}
	}()
	return out, func() { cancel(); <-done }
}

// leaderValue returns the campaign value the leader's key kv holds, and
// false when kv holds none: its value has the shape of an owner token and
// was never written again (kv.Version is 1). Such a key is a Mutex's, or a
// candidate's of dlock's earlier election layout, which put its token
// first and its record after it had won; or a candidate's that campaigns
// with a token-shaped value and has not won yet: Publish writes such a
// value again once it leads. The record of an earlier leader,
// "term\ntoken\nvalue" with term its key's create revision, gives its
// value.
func leaderValue(kv *mvccpb.KeyValue) (string, bool) {
	if r, ok := oldRecord(kv); ok {
		return r.Value, true
	}
	if kv.Version <= 1 && lease.IsToken(string(kv.Value)) {
		return "", false
	}
	return string(kv.Value), true
}

// oldRecord returns the leader's record that a leader of dlock's earlier
// election layout wrote in its key kv, if kv holds one (see Elections with
// concurrency.Election in the package doc): written over its owner token
// (so kv's version is above 1), the record holds that token, and the
// key's create revision as the term.
func oldRecord(kv *mvccpb.KeyValue) (election.Record, bool) {
	r, err := election.Parse(string(kv.Value))
	if err != nil || r.Term != uint64(kv.CreateRevision) || kv.Version < 2 || !lease.IsToken(r.Token) {
		return election.Record{}, false
	}
	return r, true
}

// ownerOf returns the owner a key kv shows, and its label: its value (a
// lock's owner token, a concurrency.Election's value, "" for a
// concurrency.Mutex), or the token of the record a leader of dlock's
// earlier election layout wrote there. A value written again (an
// election's leader's, see Publish) has no label, whatever its shape.
func ownerOf(kv *mvccpb.KeyValue) (owner, label string) {
	if r, ok := oldRecord(kv); ok {
		return r.Token, lease.Label(r.Token)
	}
	if kv.Version > 1 {
		return string(kv.Value), ""
	}
	return string(kv.Value), lease.Label(string(kv.Value))
}
