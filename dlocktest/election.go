package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// An ElectionBackend is what RunElection needs to exercise one backend's
// elections.
type ElectionBackend struct {
	// NewElection returns the election called name on a new client with
	// its own connections, as an independent process would have, and
	// closes that client when t ends. o.TTL and o.NoRenewal configure the
	// election's lock; a leader without renewal stands in for a paused
	// process, whose renewals stop.
	NewElection func(t testing.TB, name string, o Options) dlock.Election

	// CutOff returns an election like NewElection's, on a client whose
	// every connection to the servers passes through a fault proxy, and a
	// function that cuts those connections off (every byte dropped, both
	// ways), as a paused process or a partition leaves a leader; the cut
	// is healed when t ends, so that the client closes promptly. Required.
	CutOff func(t testing.TB, name string, o Options) (e dlock.Election, cut func())

	// LeaderHorizon is how long after the Until of a leader that was cut
	// off the backend's Leader may still name it, as its package
	// documents: the servers keep the leader's claim until they expire it
	// by their own clocks.
	LeaderHorizon time.Duration

	// CutOffHorizon, if not nil, is the LeaderHorizon of the leader that
	// CutOff's election made, lease being what its Campaign returned;
	// it is asked once lease has ended. A backend whose horizon includes
	// the latency of the leader's last renewal (its servers count the
	// TTL from when they ran it) measures that on the cut-off client:
	// a fixed horizon would have to guess it.
	CutOffHorizon func(t testing.TB, lease dlock.Lease) time.Duration

	// Handover bounds how long a campaign waiting for a leader that
	// resigns, or whose lease ran out, takes to notice that the election
	// is free: the longest sleep of the backend's retry strategy when no
	// notice comes (Redlock), or 0 when a notice is certain.
	Handover time.Duration
}

// ElectionTTL is the TTL of the elections RunElection makes.
var ElectionTTL = time.Second

// RunElection runs the election suite as subtests of t: at most one
// leader at a time, each with a valid lease and the term of its lease's
// fence; observers see every leader in order; Resign hands over at once;
// a leader whose renewals stop is replaced within its TTL; Campaign honours
// its context; Leader reports a vacancy with ErrNoLeader.
func RunElection(t *testing.T, b ElectionBackend) {
	if b.NewElection == nil || b.CutOff == nil {
		t.Fatal("dlocktest: ElectionBackend.NewElection and CutOff are required")
	}
	s := &electionSuite{b: b}
	t.Run("NoLeader", s.noLeader)
	t.Run("OneLeaderAtATime", s.oneLeader)
	t.Run("ObserversSeeEveryLeaderInOrder", s.observeInOrder)
	t.Run("SlowObserverSeesLatest", s.slowObserver)
	t.Run("ResignHandsOver", s.resignHandsOver)
	t.Run("StalledLeaderReplaced", s.stalledLeader)
	t.Run("LeaderEndsWithLease", s.leaderEndsWithLease)
	t.Run("CutOffLeaderEnds", s.cutOffLeaderEnds)
	t.Run("CampaignHonoursContext", s.campaignContext)
	t.Run("CampaignTwice", s.campaignTwice)
}

type electionSuite struct{ b ElectionBackend }

func (s *electionSuite) elections(t testing.TB, name string, n int, o Options) []dlock.Election {
	if o.TTL == 0 {
		o.TTL = ElectionTTL
	}
	es := make([]dlock.Election, n)
	for i := range es {
		es[i] = s.b.NewElection(t, name, o)
	}
	return es
}

func mustCampaign(t testing.TB, ctx context.Context, e dlock.Election, value string) dlock.Lease {
	t.Helper()
	l, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatalf("Campaign(%q): %v", value, err)
	}
	return l
}

// expectLeader checks that Leader reports value in term.
func expectLeader(t testing.TB, ctx context.Context, e dlock.Election, value string, term uint64) {
	t.Helper()
	got, err := e.Leader(ctx)
	if err != nil || got.Value != value || got.Term != term {
		t.Fatalf("Leader = %+v, %v; want {%q %d}", got, err, value, term)
	}
}

func expectNoLeader(t testing.TB, ctx context.Context, e dlock.Election, when string) {
	t.Helper()
	got, err := e.Leader(ctx)
	if !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader %s = %+v, %v; want ErrNoLeader", when, got, err)
	}
}

func (s *electionSuite) noLeader(t *testing.T) {
	ctx := ctxFor(t, 20*time.Second)
	es := s.elections(t, uniqueKey(t), 2, Options{})
	expectNoLeader(t, ctx, es[1], "before any campaign")
	l := mustCampaign(t, ctx, es[0], "a")
	expectLeader(t, ctx, es[1], "a", l.Fence())
	if err := es[0].Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !errors.Is(l.Err(), dlock.ErrReleased) {
		t.Fatalf("lease Err after Resign = %v; want ErrReleased", l.Err())
	}
	expectNoLeader(t, ctx, es[1], "after the leader resigned")
	if err := es[0].Resign(ctx); err != nil {
		t.Fatalf("second Resign: %v; want nil", err)
	}
	if err := es[1].Resign(ctx); err != nil {
		t.Fatalf("Resign of an election that never led: %v; want nil", err)
	}
}

// oneLeader: candidates campaign in turn; inside its term each checks that
// no one else leads, that its lease is valid, and that Leader names it.
func (s *electionSuite) oneLeader(t *testing.T) {
	const candidates, terms = 4, 5
	ctx := ctxFor(t, 60*time.Second)
	name := uniqueKey(t)
	es := s.elections(t, name, candidates, Options{})
	var inside, expired atomic.Int32
	var mu sync.Mutex
	var lastTerm uint64
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Go(func() {
			for j := range terms {
				value := fmt.Sprintf("candidate-%d-term-%d", i, j)
				l, err := e.Campaign(ctx, value)
				if err != nil {
					t.Errorf("Campaign: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				mu.Lock()
				if l.Fence() <= lastTerm {
					t.Errorf("term %d after term %d", l.Fence(), lastTerm)
				}
				lastTerm = l.Fence()
				mu.Unlock()
				if l.Err() != nil || !time.Now().Before(l.Until()) {
					t.Errorf("leader's lease not valid: Err %v, Until in %v", l.Err(), time.Until(l.Until()))
				}
				if got, err := e.Leader(ctx); err != nil || got.Value != value || got.Term != l.Fence() {
					t.Errorf("leader %q reads Leader = %+v, %v", value, got, err)
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				switch err := e.Resign(ctx); {
				case errors.Is(err, dlock.ErrExpired) && !time.Now().Before(l.Until()):
					// No renewal got through before Until (a starved
					// machine: a make test beside another, load 59): a
					// true loss, and not this case's subject.
					expired.Add(1)
				case err != nil:
					t.Errorf("Resign: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := expired.Load(); n > candidates*terms/2 {
		t.Errorf("%d of %d terms expired before their Resign: the case could not check its subject", n, candidates*terms)
	}
}

// observeInOrder: each leader in turn waits until an observer on another
// client has seen it, then resigns: the observer must see every term, in
// order, with its value.
func (s *electionSuite) observeInOrder(t *testing.T) {
	const terms = 6
	ctx := ctxFor(t, 60*time.Second)
	name := uniqueKey(t)
	es := s.elections(t, name, 3, Options{})
	octx, stop := context.WithCancel(ctx)
	seen := es[2].Observe(octx)
	var worst time.Duration
	var last uint64
	for i := range terms {
		value := fmt.Sprintf("leader-%d", i)
		e := es[i%2]
		l := mustCampaign(t, ctx, e, value)
		won := time.Now()
		select {
		case got, ok := <-seen:
			if !ok {
				t.Fatal("Observe closed before its context ended")
			}
			if got.Value != value || got.Term != l.Fence() {
				t.Fatalf("observer saw %+v; want {%q %d}", got, value, l.Fence())
			}
			if got.Term <= last {
				t.Fatalf("observer saw term %d after %d", got.Term, last)
			}
			last = got.Term
			worst = max(worst, time.Since(won))
		case <-time.After(2*time.Second + Slack):
			t.Fatalf("observer did not see leader %q (term %d) within 2s", value, l.Fence())
		}
		if err := e.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	}
	t.Logf("measured: observer notified after a campaign won (worst of 6): %v", worst)
	stop()
	select {
	case got, ok := <-seen:
		if ok {
			// A leader sent before the cancel is fine; the channel must still close.
			if _, ok := <-seen; ok {
				t.Fatalf("Observe sent %+v and more after its context ended", got)
			}
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Observe's channel not closed 2s after its context ended")
	}
}

// slowObserver: leaders change while an observer does not read; it then
// reads the latest leader, and nothing older after it.
func (s *electionSuite) slowObserver(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	es := s.elections(t, uniqueKey(t), 2, Options{})
	seen := es[1].Observe(ctx)
	var l dlock.Lease
	for i := range 4 {
		l = mustCampaign(t, ctx, es[0], fmt.Sprintf("leader-%d", i))
		if i < 3 {
			if err := es[0].Resign(ctx); err != nil {
				t.Fatalf("Resign: %v", err)
			}
		}
	}
	time.Sleep(2*time.Second + Slack) // at least one poll since the last change
	var last dlock.Leader
	for last.Term != l.Fence() {
		select {
		case got := <-seen:
			if got.Term <= last.Term {
				t.Fatalf("observer saw term %d after %d", got.Term, last.Term)
			}
			last = got
		case <-time.After(2*time.Second + Slack):
			t.Fatalf("slow observer's last leader is %+v; want {leader-3 %d}", last, l.Fence())
		}
	}
	if last.Value != "leader-3" {
		t.Fatalf("observer saw %+v; want leader-3", last)
	}
}

// resignHandsOver: a waiting campaign wins soon after the leader resigns.
func (s *electionSuite) resignHandsOver(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	es := s.elections(t, uniqueKey(t), 2, Options{})
	a := mustCampaign(t, ctx, es[0], "a")
	won := make(chan dlock.Lease, 1)
	go func() {
		l, err := es[1].Campaign(ctx, "b")
		if err != nil {
			t.Errorf("Campaign(b): %v", err)
		}
		won <- l
	}()
	time.Sleep(200 * time.Millisecond) // b waits
	resigned := time.Now()
	if err := es[0].Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	bound := s.b.Handover + 500*time.Millisecond + Slack
	select {
	case b := <-won:
		took := time.Since(resigned)
		t.Logf("measured: hand-over after Resign: %v", took)
		if b == nil {
			return
		}
		if b.Fence() <= a.Fence() {
			t.Fatalf("b's term %d not above a's %d", b.Fence(), a.Fence())
		}
		expectLeader(t, ctx, es[0], "b", b.Fence())
	case <-time.After(bound):
		t.Fatalf("b did not lead within %v of a's Resign", bound)
	}
}

// stalledLeader: a leader whose renewals stop (a fixed lease standing in
// for a paused process) learns it lost the leadership by its lease's Until,
// and a waiting campaign wins within a TTL of the last renewal.
func (s *electionSuite) stalledLeader(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	name := uniqueKey(t)
	stalled := s.b.NewElection(t, name, Options{TTL: ElectionTTL, NoRenewal: true})
	other := s.elections(t, name, 1, Options{})[0]
	sent := time.Now()
	a := mustCampaign(t, ctx, stalled, "stalled")
	l, err := other.Campaign(ctx, "next")
	won := time.Now()
	if err != nil {
		t.Fatalf("Campaign(next): %v", err)
	}
	// Done closes by a timer at Until, which a loaded machine may run a
	// little late; the next leader can only win once the server's record
	// expired, after Until. So Done may close just after the win, within
	// the timer's slack, never later.
	select {
	case <-a.Done():
	case <-time.After(Slack):
		t.Fatalf("the stalled leader's Done was still open %v after the next leader won (%v after its Until)", Slack, won.Sub(a.Until()))
	}
	if !errors.Is(a.Err(), dlock.ErrLost) {
		t.Fatalf("stalled leader's Err = %v; want ErrLost", a.Err())
	}
	if won.Before(a.Until()) {
		t.Fatalf("next leader won %v before the stalled leader's Until", a.Until().Sub(won))
	}
	bound := ElectionTTL + s.b.Handover + 500*time.Millisecond + Slack
	if took := won.Sub(sent); took > bound {
		t.Fatalf("next leader won %v after the stalled leader's campaign; want within %v", took, bound)
	}
	t.Logf("measured: failover after a stalled leader's Until: %v", won.Sub(a.Until()))
	t.Logf("measured: failover after a stalled leader's last renewal (TTL 1s): %v", won.Sub(sent))
	if l.Fence() <= a.Fence() {
		t.Fatalf("next term %d not above the stalled %d", l.Fence(), a.Fence())
	}
	expectLeader(t, ctx, stalled, "next", l.Fence())
}

// leaderEndsWithLease: a leader whose renewals stop (a fixed lease) is no
// longer named by Leader, on another client, once its lease's Until has
// passed, though no other campaign has taken its place; nor by Observe's
// channel afterwards.
func (s *electionSuite) leaderEndsWithLease(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	name := uniqueKey(t)
	stalled := s.b.NewElection(t, name, Options{TTL: ElectionTTL, NoRenewal: true})
	other := s.elections(t, name, 1, Options{})[0]
	campaigned := time.Now()
	a := mustCampaign(t, ctx, stalled, "stalled")
	// The servers count the TTL from when they ran the grant, before
	// Campaign returned: the record outlives Until by the drift allowance
	// and the grant's latency (a new client's first request, slot map and
	// dials included), at most the campaign's, which a loaded machine
	// stretches (163ms once). Leader may name the leader for the
	// backend's LeaderHorizon and that latency after Until, never later.
	horizon := s.b.LeaderHorizon + time.Since(campaigned)
	expectLeader(t, ctx, other, "stalled", a.Fence())
	var last time.Time // the last time Leader named the stalled leader
	for deadline := a.Until().Add(Slack); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		asked := time.Now()
		got, err := other.Leader(ctx)
		if err == nil && got.Term == a.Fence() {
			last = asked
		}
	}
	<-a.Done()
	for {
		asked := time.Now()
		got, err := other.Leader(ctx)
		if errors.Is(err, dlock.ErrNoLeader) {
			break
		}
		if late := asked.Sub(a.Until()); late > horizon+Slack {
			t.Fatalf("Leader asked %v after the leader's Until = %+v, %v; want ErrNoLeader (horizon %v: the backend's %v and the campaign's latency)",
				late, got, err, horizon, s.b.LeaderHorizon)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("measured: Leader last named the stalled leader %v before its Until", a.Until().Sub(last))
}

// cutOffLeaderEnds: a leader cut off from the servers learns it lost the
// leadership by its lease's Until, and Leader, on another client, stops
// naming it within the backend's LeaderHorizon of that Until.
func (s *electionSuite) cutOffLeaderEnds(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	name := uniqueKey(t)
	e, cut := s.b.CutOff(t, name, Options{TTL: ElectionTTL})
	other := s.elections(t, name, 1, Options{})[0]
	a := mustCampaign(t, ctx, e, "cut-off")
	expectLeader(t, ctx, other, "cut-off", a.Fence())
	cutAt := time.Now()
	cut()
	// By its Until, at most a TTL after the cut; judged against a timer
	// due at the Until, as a loaded machine runs timers late.
	WaitDoneByUntil(t, a, ElectionTTL+2*time.Second, "the cut (a TTL and more)")
	if over := a.Until().Sub(cutAt.Add(ElectionTTL)); over > Slack {
		t.Errorf("the cut-off leader's Until is %v more than a TTL after the cut", over)
	}
	horizon := s.b.LeaderHorizon
	if s.b.CutOffHorizon != nil {
		horizon = s.b.CutOffHorizon(t, a)
	}
	deadline := a.Until().Add(horizon + ElectionTTL + 2*time.Second)
	var last time.Time // when the last Leader that named the cut-off leader was asked
	for {
		asked := time.Now()
		got, err := other.Leader(ctx)
		if err == nil && got.Term == a.Fence() {
			last = asked
		} else if err == nil || errors.Is(err, dlock.ErrNoLeader) {
			break
		}
		if asked.After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last.IsZero() {
		t.Logf("measured: Leader did not name the cut-off leader once its Done had closed (horizon %v, TTL %v)", horizon, ElectionTTL)
		return
	}
	after := last.Sub(a.Until())
	t.Logf("measured: Leader named the cut-off leader until %v after its Until (horizon %v, TTL %v)", after.Round(time.Millisecond), horizon, ElectionTTL)
	if after > horizon+Slack {
		t.Fatalf("Leader named the cut-off leader %v after its Until; the backend's horizon is %v", after, horizon)
	}
}

// campaignContext: a campaign that cannot win ends with its context, and
// leaves the leader alone.
func (s *electionSuite) campaignContext(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	es := s.elections(t, uniqueKey(t), 2, Options{})
	a := mustCampaign(t, ctx, es[0], "a")
	const wait = 300 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	l, err := es[1].Campaign(cctx, "b")
	took := time.Since(start)
	if err == nil {
		l.Release(ctx)
		t.Fatal("Campaign won against a live leader")
	}
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign = %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	if took > wait+500*time.Millisecond+Slack {
		t.Fatalf("Campaign returned %v after its %v deadline", took-wait, wait)
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if l, err := es[1].Campaign(done, "b"); err == nil {
		l.Release(ctx)
		t.Fatal("Campaign with a cancelled context won")
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign with a cancelled context = %v; want context.Canceled", err)
	}
	expectLeader(t, ctx, es[1], "a", a.Fence())
	if a.Err() != nil {
		t.Fatalf("leader lost its lease to a failed campaign: %v", a.Err())
	}
}

// campaignTwice: an Election refuses a second Campaign while one runs or
// while it leads, and campaigns again once it resigned.
func (s *electionSuite) campaignTwice(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	es := s.elections(t, uniqueKey(t), 2, Options{})
	e := es[0]
	other := mustCampaign(t, ctx, es[1], "other")
	// A Campaign that waits for other, retried if it met one of the probes
	// below; the probes, with a cancelled context, return at once, and are
	// refused once the waiting Campaign runs.
	waiting := make(chan error, 1)
	go func() {
		for {
			l, err := e.Campaign(ctx, "a")
			if err != nil && !errors.Is(err, dlock.ErrNotObtained) && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
				continue
			}
			if err == nil {
				l.Release(ctx)
			}
			waiting <- err
			return
		}
	}()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for refused := false; !refused; {
		l, err := e.Campaign(cancelled, "probe")
		switch {
		case err == nil:
			l.Release(ctx)
			t.Fatal("Campaign with a cancelled context won against a live leader")
		case ctx.Err() != nil:
			t.Fatal("a second Campaign while one waits was never refused")
		}
		refused = !errors.Is(err, dlock.ErrNotObtained)
		time.Sleep(time.Millisecond)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the first Campaign: %v", err)
	}
	a := mustCampaign(t, ctx, e, "a")
	if l, err := e.Campaign(ctx, "again"); err == nil {
		l.Release(ctx)
		t.Fatal("a second Campaign of a leading Election succeeded")
	}
	if err := a.Release(ctx); err != nil { // Release resigns, like Resign
		t.Fatalf("Release: %v", err)
	}
	b := mustCampaign(t, ctx, e, "b")
	if b.Fence() <= a.Fence() {
		t.Fatalf("term %d after %d", b.Fence(), a.Fence())
	}
	expectLeader(t, ctx, e, "b", b.Fence())
}
