package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/redisconn"
)

// A Mutex is an exclusive lock held on a majority of a Client's nodes. It is
// not reentrant and not fair. It is safe for concurrent use; each Lock
// returns an independent Lease.
type Mutex struct {
	order  // the key it takes, which orders it in a MultiLock
	c      *Client
	name   string
	keys   keys
	slot   uint16 // the slot of name, whose fence counter it draws from
	cfg    config
	ttl    string // cfg.ttl in milliseconds, as sent
	window string // the Client's restart window in milliseconds, as sent; "0" when detection is off
	err    error
	ev     *lease.Events // nil without an observer
}

var _ dlock.Locker = (*Mutex)(nil)

// keys are the Redis names of one lock on every node (see package
// rediskeys): the same as redislock's, so that inspect and release read
// them, and the tokens ForceUnlock deposed (see quorum_force.lua).
type keys struct{ lock, fence, channel, deposed string }

// epochKey is the per-node key whose disappearance reveals lost data.
const epochKey = "dlock:epoch"

// NewMutex returns the Redlock mutex called name. It never fails: a bad
// name or option is reported by Lock and TryLock.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	k := rediskeys.For(name)
	m := &Mutex{c: c, name: name, cfg: newConfig(opts), ev: lease.NewEvents(c.obs, "redlock", name, "Mutex"),
		keys: keys{lock: k.Base, fence: k.Fence, channel: k.Channel, deposed: k.Base + deposedSuffix}}
	m.slot = rediskeys.Slot(name)
	m.ttl = strconv.FormatInt(ttlMillis(m.cfg.ttl), 10)
	m.window = "0"
	if c.cfg.detectRestart {
		m.window = strconv.FormatInt(ttlMillis(c.cfg.restartWindow), 10)
	}
	m.err = rediskeys.CheckName("redlock", name)
	if m.cfg.bare {
		b := rediskeys.Bare(name)
		m.keys = keys{lock: b.Base, fence: b.Fence, channel: b.Channel, deposed: rediskeys.BarePrefix + name + deposedSuffix}
		m.slot = rediskeys.ClusterSlot(name)
		m.err = rediskeys.CheckBareKey("redlock", name)
	}
	if m.err == nil {
		m.err = m.cfg.check(c.cfg)
	}
	m.order = lease.NewOrder(m.keys.lock)
	return m
}

// order is lease.Order under a name that keeps Mutex's field unexported.
type order = lease.Order

// Name returns the lock's name, as given to NewMutex.
func (m *Mutex) Name() string { return m.name }

// TryLock makes one attempt on every node. It returns an error matching
// dlock.ErrNotObtained when no majority could be taken in time, and one
// matching dlock.ErrUnavailable (not dlock.ErrNotObtained) when so many
// nodes could not be reached, did not answer within the node timeout, or
// sat out their restart window, that no majority could vote: then
// nobody knows whether the lock is held. Either way it returns within the
// node timeout, or twice it when a grant writes its fence back (see the
// package doc). The error also carries the NodeErrors of nodes that failed.
func (m *Mutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	// The attempt keeps ctx, not Begin's context, which ends with the
	// call: the requests to the nodes slower than a majority go on after
	// it. An attempt is bounded by the node timeout.
	_, end := m.c.leases.Begin(ctx)
	l, err := m.tryLock(ctx)
	return a.End(l, end(err))
}

func (m *Mutex) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	g, err := m.attempt(ctx)
	if g == nil {
		return nil, err
	}
	return g, nil
}

// Lock attempts until it holds a majority, ctx is done or the retry
// strategy gives up, waiting a jittered backoff between attempts. It waits
// through nodes that cannot be reached, do not answer, or sit out their
// restart window, as through a lock held by another; if ctx ends, or the
// strategy gives up, while too many of them fail for a majority to vote,
// the error also matches dlock.ErrUnavailable and says since when.
func (m *Mutex) Lock(ctx context.Context) (dlock.Lease, error) {
	a := m.ev.Begin(ctx)
	wctx, end := m.c.leases.Begin(ctx) // ends the wait when the Client closes
	l, err := m.lock(ctx, wctx, &a)
	return a.End(l, end(err))
}

// lock is Lock's body. Its attempts use ctx, as TryLock's does; its
// checks and waits use wctx, which Close also ends.
func (m *Mutex) lock(ctx, wctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if err := m.check(wctx); err != nil {
		return nil, err
	}
	var idle pause.Timer
	defer idle.Stop()
	var down outage
	for n := 1; ; n++ {
		if err := m.c.usable(); err != nil {
			return nil, err
		}
		g, err := m.attempt(ctx)
		if g != nil {
			return g, nil
		}
		if !errors.Is(err, dlock.ErrNotObtained) && !errors.Is(err, dlock.ErrUnavailable) {
			return nil, err
		}
		down.note(err)
		if wctx.Err() != nil {
			return nil, down.interrupted(m.c, wctx.Err(), err)
		}
		wait, ok := m.cfg.retry.Backoff(n)
		if !ok {
			if errors.Is(err, dlock.ErrNotObtained) {
				return nil, err
			}
			return nil, dlock.NotObtained(err)
		}
		a.Waiting()
		if !idle.Wait(wctx, nil, wait) {
			return nil, down.interrupted(m.c, wctx.Err(), err)
		}
	}
}

func (m *Mutex) check(ctx context.Context) error {
	if err := m.c.usable(); err != nil {
		return err
	}
	if m.err != nil {
		return m.err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	return nil
}

// attempt runs one round of the algorithm: acquire on all nodes; on a
// majority, choose the fence (writing it back to a majority only if the
// majority's counters disagree) and check the validity left. It returns a
// lease, or an error matching ErrNotObtained, or a hard error.
func (m *Mutex) attempt(ctx context.Context) (*grant, error) {
	token := lease.NewToken(ctx)
	start := time.Now()
	n, quorum := len(m.c.nodes), m.c.quorum
	acquire := redisscript.QuorumAcquireCall{Lock: m.keys.lock, Fence: m.keys.fence, Epoch: epochKey,
		Token: token, TTL: m.ttl, Window: m.window, Fresh: !m.c.knowsCounter(m.slot)}.Call()
	replies := m.c.fanOut(ctx, acquire)
	if m.c.cfg.detectRestart {
		m.c.checkSoon()
	}

	var (
		voters   []int // nodes that voted for us, in the order they answered
		votes    = make([]vote, n)
		outcome  = make([]acqOutcome, n)
		waiting  []abstention // nodes that took the key but may not vote yet
		answered int
		nodeErrs []error
		hardErrs []error
		failing  int // nodes that could not be reached, did not answer, or could not serve the call
		told     int // of failing, those whose failure is the node's own, not ctx ending first
	)
	// The round ends once it has a majority, or cannot have one; but
	// while nodes have failed, it also waits for the replies that decide
	// whether too many failed for any majority to vote (unavailable) or
	// not (held by another): a node that answered that the lock is held
	// does not tell that, when most of the others fail.
	undecided := func() bool {
		cannot := failing + len(waiting) + len(hardErrs)
		return cannot > 0 && cannot <= n-quorum && cannot+(n-answered) > n-quorum
	}
	for answered < n && len(voters) < quorum && (len(voters)+(n-answered) >= quorum || undecided()) {
		r := <-replies
		answered++
		outcome[r.node] = outcomeOf(r)
		if r.res.Err != nil {
			err := &NodeError{Node: m.c.nodes[r.node].name, Err: r.res.Err}
			nodeErrs = append(nodeErrs, err)
			if redisscript.Transient(r.res.Err) {
				failing++
				if !cutByCaller(r.res.Err) {
					told++
				}
			} else { // a refusal, a closed Redis client, a TLS handshake refused
				hardErrs = append(hardErrs, &NodeError{Node: err.Node, Err: m.describe(r.res.Err)})
			}
			continue
		}
		v, err := parseVote(r.res.Val)
		if err != nil {
			nodeErrs = append(nodeErrs, &NodeError{Node: m.c.nodes[r.node].name, Err: err})
			continue
		}
		votes[r.node] = v
		m.c.learn(m.slot, v)
		if !v.taken {
			m.c.observe(r.node, v)
			continue
		}
		if ok, a := m.c.judge(r.node, v); ok {
			voters = append(voters, r.node)
		} else {
			waiting = append(waiting, a)
		}
	}
	release := redisscript.ReleaseCall{Lock: m.keys.lock, Token: token, Channel: m.keys.channel}.Call(redisscript.Release)
	fail := func(why error) (*grant, error) {
		s := m.c.newSweep(release, m.cfg.ttl)
		for i, o := range outcome {
			s.del[i] = o == acqTaken || o == acqUnknown
			s.late[i] = o == acqUnknown
		}
		s.acq, s.acqLeft = replies, n-answered
		m.c.start(s)
		if len(hardErrs) > n-quorum { // the servers refuse: retrying cannot help
			return nil, errors.Join(hardErrs...)
		}
		// Too many nodes could not vote for any majority to form
		// (failing, abstaining, or refusing for good): whether the lock
		// is held is unknown. What the nodes answered before ctx ended
		// says so whenever this is looked at: a goroutine that counts
		// the replies may run after the deadline that they beat.
		if told+len(waiting)+len(hardErrs) > n-quorum {
			return nil, m.c.unavailable(start, why)
		}
		if cause := cancelled(ctx); cause != nil {
			return nil, &cutShort{cause: cause}
		}
		if failing+len(waiting)+len(hardErrs) > n-quorum {
			return nil, m.c.unavailable(start, why)
		}
		return nil, dlock.NotObtained(why)
	}
	if len(voters) < quorum {
		why := errQuorum("acquire", m.keys.lock, len(voters), quorum, n, nodeErrs)
		if len(waiting) > 0 {
			why = fmt.Errorf("%w (%s)", why, m.c.abstained(waiting))
		}
		return fail(why)
	}

	// The replies that came while the vote was counted count too: a
	// write-back then brings their counters in step as well.
late:
	for answered < n {
		select {
		case r := <-replies:
			answered++
			outcome[r.node] = outcomeOf(r)
			if v, err := parseVote(r.res.Val); r.res.Err == nil && err == nil {
				votes[r.node] = v
				m.c.learn(m.slot, v)
				m.c.observe(r.node, v)
			}
		default:
			break late
		}
	}
	fence, agreed := chooseFence(votes, took(outcome))
	if !agreed {
		// Every node that took our key, voter or not, or may have: the
		// fence script writes only where the key is ours, and a node left
		// out would disagree again at the next grant.
		var holders []int
		for i, o := range outcome {
			if o != acqRefused {
				holders = append(holders, i)
			}
		}
		if err := m.writeFence(ctx, holders, token, fence); err != nil {
			return fail(err)
		}
	}
	if cancelled(ctx) != nil { // the caller gave up while we were acquiring
		return fail(nil)
	}
	until := start.Add(m.cfg.ttl - drift(m.cfg.ttl))
	if !time.Now().Before(until) {
		return fail(fmt.Errorf("redlock: acquiring %q took %v, longer than the TTL %v less the drift allowance", m.keys.lock, time.Since(start), m.cfg.ttl))
	}
	g := newGrant(ctx, m, token, fence, until)
	g.acq, g.acqReplies, g.acqLeft = outcome, replies, n-answered
	if !m.c.leases.Add(g) {
		g.End(dlock.Lost(ErrClosed))
		s := m.c.newSweep(release, m.cfg.ttl)
		for i := range s.del {
			s.del[i], s.late[i] = true, outcome[i] != acqTaken && outcome[i] != acqRefused
		}
		s.acq, s.acqLeft = replies, n-answered
		m.c.start(s)
		return nil, ErrClosed
	}
	if m.cfg.renew {
		m.c.renew.AddFirst(&g.entry, m.cfg.ttl/3, m.firstRenewal(outcome))
	}
	if err := lease.Fresh(ctx, g, m.cfg.ttl); err != nil {
		return nil, err
	}
	return g, nil // late replies are part of our lock; Release reaches them
}

// firstRenewal returns when a grant is first renewed: after TTL/3 if
// every node took its key, and otherwise after TTL/10, so that the renewal
// takes back sooner the nodes a competitor's attempt held (see retake.go).
// A node yet to answer counts as one that did not take it: its reply may
// be a refusal. A lease released sooner costs nothing; one held longer,
// one renewal more.
func (m *Mutex) firstRenewal(outcome []acqOutcome) time.Duration {
	for _, o := range outcome {
		if o != acqTaken {
			return m.cfg.ttl / 10
		}
	}
	return m.cfg.ttl / 3
}

// took returns the nodes whose acquire took the key, voters or not: the
// fence counts all their counters.
func took(outcome []acqOutcome) []int {
	var t []int
	for i, o := range outcome {
		if o == acqTaken {
			t = append(t, i)
		}
	}
	return t
}

// describe explains an error reply of the acquire script.
func (m *Mutex) describe(err error) error {
	if re := (*redisconn.ReplyError)(nil); errors.As(err, &re) && strings.HasPrefix(re.Msg, "DLOCKINFO") {
		return fmt.Errorf("redlock: restart detection needs INFO and LASTSAVE inside scripts, and the node refused (%s); allow both for this user (ACL +info +lastsave), or turn detection off with WithoutRestartDetection: %w", re.Msg, err)
	}
	return redisscript.Describe("redlock", m.keys.lock, redisscript.QuorumAcquire, err)
}

// cancelled returns the context error that ended an attempt, or nil. A
// transport may report the deadline slightly before ctx.Err() is set.
func cancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
