package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// interopTTL is the lease time of both sides' candidates: a handover
// measured well under it came by the resignation, not by an expiry.
const interopTTL = 5 * time.Second

// etcdElection returns etcd's own election called name, on a session and
// client of its own.
func etcdElection(t *testing.T, addr, name string) *concurrency.Election {
	t.Helper()
	s, err := concurrency.NewSession(dial(t, addr), concurrency.WithTTL(int(interopTTL/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return concurrency.NewElection(s, name)
}

// etcdLeader returns what concurrency.Election.Leader reports: the leader's
// value and its key's create revision.
func etcdLeader(t *testing.T, ctx context.Context, e *concurrency.Election) (string, uint64) {
	t.Helper()
	resp, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("concurrency Leader: %v", err)
	}
	return string(resp.Kvs[0].Value), uint64(resp.Kvs[0].CreateRevision)
}

// awaitObserved waits for want on ch, skipping earlier leaders.
func awaitObserved[T any](t *testing.T, ch <-chan T, what string, match func(T) bool) T {
	t.Helper()
	timeout := time.After(interopTTL)
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("%s: Observe's channel closed", what)
			}
			if match(got) {
				return got
			}
		case <-timeout:
			t.Fatalf("%s: not observed within %v", what, interopTTL)
		}
	}
}

// dlock's election and etcd's concurrency.Election on one name are one
// election: each side's Leader and Observe name the other's leader, with
// its value and with its key's create revision as the term, neither side
// campaigns past the other's leader, and a resignation hands over to the
// other side at once.
func TestIntegrationConcurrencyElectionInterop(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
	ce := etcdElection(t, e.Addr(), name)
	ctx := ctxFor(t, time.Minute)
	dObs := de.Observe(ctx)
	cObs := ce.Observe(ctx)

	// dlock leads: concurrency's Leader and Observe name it.
	l, err := de.Campaign(ctx, "dlock-1")
	if err != nil {
		t.Fatal(err)
	}
	if v, rev := etcdLeader(t, ctx, ce); v != "dlock-1" || rev != l.Fence() {
		t.Errorf("concurrency Leader = %q at revision %d; want %q at the dlock term %d", v, rev, "dlock-1", l.Fence())
	}
	awaitObserved(t, cObs, "concurrency Observe of the dlock leader", func(r clientv3.GetResponse) bool {
		return string(r.Kvs[0].Value) == "dlock-1" && uint64(r.Kvs[0].CreateRevision) == l.Fence()
	})
	awaitObserved(t, dObs, "dlock Observe of its own leader", func(ld dlock.Leader) bool { return ld.Term == l.Fence() })

	// concurrency does not campaign past it; it waits, and takes over at
	// the resignation.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := ce.Campaign(short, "etcd-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("concurrency Campaign while dlock leads = %v; want its deadline", err)
	}
	cancel()
	won := make(chan time.Time, 1)
	go func() {
		if err := ce.Campaign(ctx, "etcd-1"); err != nil {
			t.Errorf("concurrency Campaign: %v", err)
		}
		won <- time.Now()
	}()
	waitKeys(t, dial(t, e.Addr()), name+"/", 2)
	resigned := time.Now()
	if err := de.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	delay := (<-won).Sub(resigned)
	t.Logf("measured: concurrency.Election took over %v after the dlock leader's Resign", delay)
	if delay > interopTTL/2 {
		t.Errorf("concurrency took over %v after the Resign; want well under the TTL %v", delay, interopTTL)
	}

	// concurrency leads: dlock's Leader and Observe name it.
	term := uint64(ce.Rev())
	if term <= l.Fence() {
		t.Errorf("concurrency leader's revision %d is not above the dlock term %d", term, l.Fence())
	}
	if ld, err := de.Leader(ctx); err != nil || ld != (dlock.Leader{Value: "etcd-1", Term: term}) {
		t.Errorf("dlock Leader = %+v, %v; want etcd-1 at term %d", ld, err, term)
	}
	awaitObserved(t, dObs, "dlock Observe of the concurrency leader", func(ld dlock.Leader) bool {
		if ld.Term == term && ld.Value != "etcd-1" {
			t.Errorf("dlock Observe = %+v; want etcd-1", ld)
		}
		return ld.Term == term
	})

	// dlock does not campaign past it; it waits, and takes over at the
	// resignation.
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := de.Campaign(short, "dlock-2"); !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dlock Campaign while concurrency leads = %v; want ErrNotObtained and the deadline", err)
	}
	cancel()
	type result struct {
		l   dlock.Lease
		err error
		at  time.Time
	}
	next := make(chan result, 1)
	go func() { l, err := de.Campaign(ctx, "dlock-2"); next <- result{l, err, time.Now()} }()
	waitKeys(t, dial(t, e.Addr()), name+"/", 2)
	resigned = time.Now()
	if err := ce.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-next
	if r.err != nil {
		t.Fatalf("dlock Campaign after the concurrency Resign: %v", r.err)
	}
	delay = r.at.Sub(resigned)
	t.Logf("measured: dlock's election took over %v after the concurrency leader's Resign", delay)
	if delay > interopTTL/2 {
		t.Errorf("dlock took over %v after the Resign; want well under the TTL %v", delay, interopTTL)
	}
	if r.l.Fence() <= term {
		t.Errorf("dlock term %d is not above the concurrency leader's %d", r.l.Fence(), term)
	}
	if v, rev := etcdLeader(t, ctx, ce); v != "dlock-2" || rev != r.l.Fence() {
		t.Errorf("concurrency Leader = %q at revision %d; want dlock-2 at %d", v, rev, r.l.Fence())
	}
	awaitObserved(t, cObs, "concurrency Observe of the second dlock leader", func(g clientv3.GetResponse) bool {
		return string(g.Kvs[0].Value) == "dlock-2"
	})
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := de.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("dlock Leader after every resignation = %v; want ErrNoLeader", err)
	}
	if ks := keys(t, dial(t, e.Addr()), name+"/"); len(ks) != 0 {
		t.Errorf("keys left under %s: %v", name+"/", ks)
	}
}

// Candidates of both sides campaign over and over on one name: each
// leader increments a counter the non-atomic way and checks that nobody
// else is inside, and the terms strictly increase. Each side observes the
// other's leaders as they come.
func TestIntegrationConcurrencyElectionAlternate(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, 2*time.Minute)
	const perSide, rounds = 2, 25
	var (
		inside atomic.Int32
		// counter is read and written in two steps, so only the election
		// keeps updates from being lost (atomic only because the race
		// detector cannot see ordering through etcd).
		counter  atomic.Int64
		mu       sync.Mutex
		last     uint64
		leaders  = map[uint64]string{} // term -> value
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	lead := func(term uint64, value string) {
		if n := inside.Add(1); n != 1 {
			fail("%s led while %d others did", value, n-1)
		}
		mu.Lock()
		if term <= last {
			failures = append(failures, fmt.Sprintf("term %d (%s) after %d", term, value, last))
		}
		last = term
		leaders[term] = value
		mu.Unlock()
		v := counter.Load()
		runtime.Gosched()
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		counter.Store(v + 1)
		inside.Add(-1)
	}

	obsCtx, stopObs := context.WithCancel(ctx)
	var seenD []dlock.Leader
	var seenC []clientv3.GetResponse
	var obs sync.WaitGroup
	obs.Go(func() {
		for ld := range connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL)).Observe(obsCtx) {
			seenD = append(seenD, ld)
		}
	})
	obs.Go(func() {
		for r := range etcdElection(t, e.Addr(), name).Observe(obsCtx) {
			seenC = append(seenC, r)
		}
	})

	var wg sync.WaitGroup
	for i := range perSide {
		de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
		wg.Go(func() {
			for j := range rounds {
				value := fmt.Sprintf("dlock-%d-%d", i, j)
				l, err := de.Campaign(ctx, value)
				if err != nil {
					fail("%s: Campaign: %v", value, err)
					return
				}
				lead(l.Fence(), value)
				if err := de.Resign(ctx); err != nil {
					fail("%s: Resign: %v", value, err)
				}
			}
		})
		ce := etcdElection(t, e.Addr(), name)
		wg.Go(func() {
			for j := range rounds {
				value := fmt.Sprintf("etcd-%d-%d", i, j)
				if err := ce.Campaign(ctx, value); err != nil {
					fail("%s: Campaign: %v", value, err)
					return
				}
				lead(uint64(ce.Rev()), value)
				if err := ce.Resign(ctx); err != nil {
					fail("%s: Resign: %v", value, err)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the observers' last notices
	stopObs()
	obs.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if want := int64(2 * perSide * rounds); counter.Load() != want {
		t.Errorf("counter = %d; want %d (lost updates: two leaders at once)", counter.Load(), want)
	}

	// What each side observed were leaders, with their values, in order.
	var fromEtcd, fromDlock, wrong int
	errorf := func(format string, args ...any) {
		if wrong++; wrong <= 5 {
			t.Errorf(format, args...)
		}
	}
	var prev uint64
	for _, ld := range seenD {
		if leaders[ld.Term] != ld.Value || ld.Term <= prev {
			errorf("dlock observed %+v after term %d; the leader of that term was %q", ld, prev, leaders[ld.Term])
		}
		prev = ld.Term
		if len(ld.Value) > 4 && ld.Value[:4] == "etcd" {
			fromEtcd++
		}
	}
	for _, r := range seenC {
		kv := r.Kvs[0]
		if v := leaders[uint64(kv.CreateRevision)]; v != string(kv.Value) {
			errorf("concurrency observed %q at revision %d; the leader of that term was %q", kv.Value, kv.CreateRevision, v)
		}
		if len(kv.Value) > 5 && string(kv.Value[:5]) == "dlock" {
			fromDlock++
		}
	}
	if wrong > 5 {
		t.Errorf("%d wrong observations in all", wrong)
	}
	t.Logf("measured: %d leaderships (%d dlock, %d concurrency), 0 overlaps if no error above; dlock observed %d leaders (%d concurrency's), concurrency observed %d (%d dlock's)",
		counter.Load(), perSide*rounds, perSide*rounds, len(seenD), fromEtcd, len(seenC), fromDlock)
	if fromEtcd == 0 || fromDlock == 0 {
		t.Errorf("dlock observed %d concurrency leaders, concurrency %d dlock leaders; want some of each", fromEtcd, fromDlock)
	}
	if ks := keys(t, dial(t, e.Addr()), name+"/"); len(ks) != 0 {
		t.Errorf("keys left under %s: %v", name+"/", ks)
	}
}

// A candidate of dlock's earlier election layout (its owner token in its
// key while it waits, then "term\ntoken\nvalue") beside this one, as in a
// rolling deploy: the keys are the same, so it excludes this layout's
// candidates; Leader reads its value once it has written its record, and
// names no leader before.
func TestIntegrationElectionEarlierLayout(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))

	// The earlier layout's leader, as it was between its grant and its
	// record: its key holds its owner token.
	gr, err := cli.Grant(ctx, int64(interopTTL/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%s/%x", name, int64(gr.ID))
	token := dlock.NewToken() + "~host=old"
	put, err := cli.Put(ctx, key, token, clientv3.WithLease(gr.ID))
	if err != nil {
		t.Fatal(err)
	}
	term := uint64(put.Header.Revision)
	if ld, err := de.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader while the earlier layout's leader has only its token = %+v, %v; want ErrNoLeader", ld, err)
	}
	if _, err := cli.Put(ctx, key, fmt.Sprintf("%d\n%s\nold-leader", term, token), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	if ld, err := de.Leader(ctx); err != nil || ld != (dlock.Leader{Value: "old-leader", Term: term}) {
		t.Errorf("Leader = %+v, %v; want old-leader at term %d", ld, err, term)
	}
	info, err := connect(t, []string{e.Addr()}).Inspect(ctx, name)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != token || info.Holders[0].Label != "host=old" {
		t.Errorf("Inspect = %+v, %v; want the earlier leader's token %q, labelled", info, err, token)
	}

	// A campaign of this layout waits for it.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := de.Campaign(short, "new"); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("Campaign while the earlier layout's leader leads = %v; want ErrNotObtained", err)
	}
	cancel()
	if _, err := cli.Revoke(ctx, gr.ID); err != nil {
		t.Fatal(err)
	}
	l, err := de.Campaign(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Fence() <= term {
		t.Errorf("term %d not above the earlier leader's %d", l.Fence(), term)
	}
	if ld, err := de.Leader(ctx); err != nil || ld != (dlock.Leader{Value: "new", Term: l.Fence()}) {
		t.Errorf("Leader = %+v, %v; want new at term %d", ld, err, l.Fence())
	}
}

// A Mutex's holder on the election's name is no leader: its key holds an
// owner token, not a campaign value.
func TestIntegrationElectionMutexHolderIsNoLeader(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{e.Addr()})
	l, err := c.NewMutex(name, etcdlock.WithTTL(interopTTL)).Lock(dlock.WithLabel(ctx, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if ld, err := c.NewElection(name).Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader while a Mutex holds = %+v, %v; want ErrNoLeader", ld, err)
	}
}
