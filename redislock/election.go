package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the Mutex called name, made with opts, and keeps its value
// in the key dlock:{name}:leader, which expires one TTL after the leader
// stops renewing it; every change is published on the channel
// dlock:{name}:leader, and observers read the key again at least every
// min(TTL/4, 1s) in case a notice is missed. Leader names a leader cut
// off from Redis until its lock key expires: at most the drift allowance
// (dlock.Drift) plus the latency of its last renewal after its Until.
// NewElection never fails: a bad name or option is reported by every call.
//
// An election cannot use WithBareKey (its record sits beside dlock's key):
// every call then returns an error matching ErrBareKeyUnsupported.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	if m.cfg.bare {
		m.err = m.cfg.noBareKey("election")
	}
	k := keysFor(name)
	s := &electionStore{c: c, lock: k.lock, record: k.lock + ":leader", channel: k.lock + ":leader", ttl: m.ttl}
	return election.New(election.Config{Name: name, Lock: m, Store: s, TTL: m.cfg.ttl, Republish: true, Err: m.err})
}

type electionStore struct {
	c                     *Client
	lock, record, channel string
	ttl                   string // in milliseconds
}

func (s *electionStore) Publish(ctx context.Context, l dlock.Lease, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	call := redisscript.ElectPublishCall{Lock: s.lock, Record: s.record, Token: r.Token, Value: r.String(), TTL: s.ttl, Channel: s.channel}.Call()
	v, err := s.c.eval(ctx, call)
	if err != nil {
		return redisscript.Describe("redislock", s.lock, redisscript.ElectPublish, err)
	}
	if v != int64(1) {
		return election.ErrNotHolder
	}
	return nil
}

func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if err := s.c.usable(); err != nil {
		return election.Record{}, false, err
	}
	call := redisscript.ElectReadCall{Lock: s.lock, Record: s.record}.Call()
	v, err := s.c.eval(ctx, call)
	if err != nil {
		return election.Record{}, false, redisscript.Describe("redislock", s.lock, redisscript.ElectRead, err)
	}
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return election.Record{}, false, fmt.Errorf("redislock: elect_read: unexpected reply %v", v)
	}
	lock, _ := pair[0].(string)
	rec, _ := pair[1].(string)
	if lock == "" || rec == "" {
		return election.Record{}, false, nil
	}
	r, err := election.Parse(rec)
	if err != nil {
		return election.Record{}, false, errors.New("redislock: " + s.record + ": " + err.Error())
	}
	if lock != r.Token && lock != r.Token+redisscript.WaiterMark {
		return election.Record{}, false, nil // the record of a deposed leader
	}
	return r, true, nil
}

func (s *electionStore) Withdraw(ctx context.Context, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	call := redisscript.ElectWithdrawCall{Record: s.record, Value: r.String(), Channel: s.channel}.Call()
	_, err := s.c.eval(ctx, call)
	return err
}

func (s *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	if s.c.usable() != nil {
		return nil, func() {}
	}
	w := s.c.subs.wait(ctx, s.channel, false)
	return w.c, func() { w.close(false) }
}
