package etcdlock_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// shortID returns a 22-character URL-safe base64 ID, the shape of a
// shortuuid or of 16 random bytes encoded: the shape of an owner token.
func shortID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// A leader whose value has the shape of an owner token (an instance ID of
// 22 URL-safe base64 characters, say) is named by Leader and Observe, once
// its Campaign has returned.
func TestIntegrationElectionTokenShapedValue(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	obs := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
	seen := obs.Observe(ctx)
	for _, value := range []string{shortID(t), shortID(t) + "~pod-7"} {
		de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
		l, err := de.Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		want := dlock.Leader{Value: value, Term: l.Fence()}
		if ld, err := obs.Leader(ctx); err != nil || ld != want {
			t.Errorf("Leader = %+v, %v; want %+v", ld, err, want)
		}
		info, err := connect(t, []string{e.Addr()}).Inspect(ctx, name)
		if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != value || info.Holders[0].Label != "" {
			t.Errorf("Inspect = %+v, %v; want the leader's value %q as Owner, with no Label", info, err, value)
		}
		select {
		case ld := <-seen:
			if ld != want {
				t.Errorf("Observe = %+v; want %+v", ld, want)
			}
		case <-time.After(interopTTL):
			t.Errorf("Observe did not name the leader %+v within %v", want, interopTTL)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ld, err := obs.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
			t.Errorf("Leader after the resignation = %+v, %v; want ErrNoLeader", ld, err)
		}
	}

	// A concurrency candidate's such value is named once it has
	// Proclaimed it: as first written, it reads as a token.
	ce := etcdElection(t, e.Addr(), name)
	value := shortID(t)
	if err := ce.Campaign(ctx, value); err != nil {
		t.Fatal(err)
	}
	if ld, err := obs.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader of a concurrency candidate with a token-shaped value = %+v, %v; want ErrNoLeader until it Proclaims", ld, err)
	}
	if err := ce.Proclaim(ctx, value); err != nil {
		t.Fatal(err)
	}
	want := dlock.Leader{Value: value, Term: uint64(ce.Rev())}
	if ld, err := obs.Leader(ctx); err != nil || ld != want {
		t.Errorf("Leader after Proclaim = %+v, %v; want %+v", ld, err, want)
	}
	if err := ce.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// The leader of an election whose name is under another's (name/sub) is
// not the leader of the election called name: its key is under name/, but
// not one of name's candidates' keys. The two are two elections, as a and
// a/b are two locks: name has no leader, and Observe names nobody.
func TestIntegrationElectionNestedName(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{e.Addr()})
	outer := c.NewElection(name, etcdlock.WithTTL(interopTTL))
	seen := outer.Observe(ctx)
	for _, sub := range []string{"jobs", "5"} {
		l, err := c.NewElection(name+"/"+sub, etcdlock.WithTTL(interopTTL)).Campaign(ctx, sub+"-leader")
		if err != nil {
			t.Fatal(err)
		}
		if ld, err := outer.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
			t.Errorf("Leader of %q while %q leads = %+v, %v; want an error matching ErrNoLeader: they are two elections", name, name+"/"+sub, ld, err)
		}
		if ld, err := etcdElection(t, e.Addr(), name).Leader(ctx); err == nil {
			t.Logf("concurrency.Election %q names %q's leader: %q", name, name+"/"+sub, ld.Kvs[0].Value)
		}
		select {
		case ld := <-seen:
			t.Errorf("Observe of %q named %+v, the leader of %q", name, ld, name+"/"+sub)
		case <-time.After(1500 * time.Millisecond): // the watch, or a poll (1s at most)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A value that happens to read as a leader's record of dlock's earlier
// layout, "term\ntoken\nvalue" with term its key's create revision, is
// the leader's value whole: an earlier layout's record has an owner token
// on its second line, and was written after the key (its version is 2).
func TestIntegrationElectionRecordShapedValue(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	de := connect(t, []string{e.Addr()}).NewElection(name, etcdlock.WithTTL(interopTTL))
	for try := 0; ; try++ {
		// The candidate's key is the next revision on this server (Grant
		// writes none), unless another test writes in between.
		resp, err := cli.Get(ctx, name+"/")
		if err != nil {
			t.Fatal(err)
		}
		value := fmt.Sprintf("%d\nprimary\n10.0.0.7:8080", resp.Header.Revision+1)
		l, err := de.Campaign(ctx, value)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(l.Fence()) != value[:strings.Index(value, "\n")] && try < 5 {
			l.Release(ctx)
			continue
		}
		if ld, err := de.Leader(ctx); err != nil || ld != (dlock.Leader{Value: value, Term: l.Fence()}) {
			t.Errorf("Leader = %+v, %v; want %q at term %d", ld, err, value, l.Fence())
		}
		l.Release(ctx)
		return
	}
}

// A Campaign one of whose transactions the server carries out but whose
// reply is lost (the client hears Unavailable) waits through it: the
// first, which queues its key (the retry finds the key the lost one made,
// and does not make another), or the second, which publishes it as the
// leader. It leads with one key, holding its value, at that key's create
// revision.
func TestIntegrationElectionCampaignReplyLost(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	var txns, lose atomic.Int32
	loseTxn := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && method == "/etcdserverpb.KV/Txn" && txns.Add(1) == lose.Load() {
			return status.Error(codes.Unavailable, "the reply was lost (test)")
		}
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(loseTxn)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := etcdlock.New(cli)
	defer c.Close()
	for _, tc := range []struct {
		value string
		lose  int32
	}{{"plain", 1}, {shortID(t), 1}, {"plain", 2}, {shortID(t), 2}} {
		value := tc.value
		txns.Store(0)
		lose.Store(tc.lose)
		l, err := c.NewElection(name, etcdlock.WithTTL(interopTTL)).Campaign(ctx, value)
		if err != nil {
			t.Fatalf("Campaign(%q) whose transaction %d lost its reply: %v", value, tc.lose, err)
		}
		if txns.Load() <= tc.lose {
			t.Fatalf("%d transactions; want the lost one and its retry", txns.Load())
		}
		resp, err := dial(t, e.Addr()).Get(ctx, name+"/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value || uint64(resp.Kvs[0].CreateRevision) != l.Fence() {
			t.Fatalf("keys under %s/: %v; want one, holding %q, created at the term %d", name, resp.Kvs, value, l.Fence())
		}
		if ld, err := connect(t, []string{e.Addr()}).NewElection(name).Leader(ctx); err != nil || ld != (dlock.Leader{Value: value, Term: l.Fence()}) {
			t.Errorf("Leader = %+v, %v; want %q at term %d", ld, err, value, l.Fence())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// An observer whose connection goes silent (its requests and their
// replies lost) while the leadership changes learns the new leader once
// the network heals, and its Leader, with no deadline of its own, fails
// with an error matching ErrUnavailable meanwhile: each read is an attempt
// of its own, made again, and a cluster that does not answer fails a read
// after TryLock's bound.
func TestIntegrationElectionObserverCutOff(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	const ttl = 2 * time.Second // TryLock's bound: 2s
	p := testenv.StartProxy(t, e.Addr())
	obs := connect(t, []string{p.Addr()}).NewElection(name, etcdlock.WithTTL(ttl))
	seen := obs.Observe(ctx)
	c := connect(t, []string{e.Addr()})
	l, err := c.NewElection(name, etcdlock.WithTTL(ttl)).Campaign(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	awaitObserved(t, seen, "A", func(ld dlock.Leader) bool { return ld.Value == "A" })

	p.Blackhole(true)
	leader := make(chan error, 1)
	start := time.Now()
	go func() { _, err := obs.Leader(context.Background()); leader <- err }()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.NewElection(name, etcdlock.WithTTL(ttl)).Campaign(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	select {
	case err := <-leader:
		t.Logf("measured: Leader failed after %v: %v", time.Since(start), err)
		if !errors.Is(err, dlock.ErrUnavailable) {
			t.Errorf("Leader on a silent connection = %v; want an error matching ErrUnavailable", err)
		}
	case <-time.After(2 * ttl):
		t.Errorf("Leader on a silent connection has not returned after %v", 2*ttl)
	}
	p.Blackhole(false)
	healed := time.Now()
	awaitObserved(t, seen, "B after the network healed", func(ld dlock.Leader) bool { return ld.Value == "B" })
	t.Logf("measured: the observer named B %v after the network healed", time.Since(healed))
}

// A Campaign that has won but cannot publish (the cluster stopped
// answering its transactions) returns once the Client is closed, as a
// Lock under way does, with an error matching ErrClosed.
func TestIntegrationElectionCloseWhilePublishing(t *testing.T) {
	e := sharedEtcd(t)
	name := "compat/" + t.Name()
	var txns atomic.Int32
	publishing := make(chan struct{})
	silent := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" && txns.Add(1) >= 2 { // the queueing goes through, then nothing
			if txns.Load() == 2 {
				close(publishing)
			}
			<-ctx.Done()
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(silent)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := etcdlock.New(cli)
	done := make(chan error, 1)
	go func() {
		_, err := c.NewElection(name, etcdlock.WithTTL(interopTTL)).Campaign(context.Background(), "v")
		done <- err
	}()
	<-publishing
	closed := time.Now()
	c.Close()
	select {
	case err := <-done:
		t.Logf("measured: Campaign returned %v after Close: %v", time.Since(closed), err)
		if !errors.Is(err, etcdlock.ErrClosed) {
			t.Errorf("Campaign after Close = %v; want an error matching ErrClosed", err)
		}
	case <-time.After(interopTTL):
		t.Errorf("Campaign publishing on a silent cluster has not returned %v after Close", interopTTL)
	}
}

// An observer whose member lost its leader for a while (its watch, which
// requires one, is then cancelled) watches again: it names each later
// leader at once, not at its next poll (a second apart at this TTL).
func TestIntegrationElectionObserverWatchesAgain(t *testing.T) {
	cl := testenv.StartEtcdCluster(t, 3)
	m := cl.Members
	name := "compat/" + t.Name()
	ctx := ctxFor(t, time.Minute)
	const ttl = 8 * time.Second // the observers' poll: 1s
	obs := connect(t, []string{m[0].Addr()}).NewElection(name, etcdlock.WithTTL(ttl))
	seen := obs.Observe(ctx)
	c := connect(t, []string{m[0].Addr(), m[1].Addr(), m[2].Addr()})
	// Each campaign comes a moment after the observer's read of the last
	// leader: without a watch the observer names it about a poll later.
	handover := func(v string) time.Duration {
		l, err := c.NewElection(name, etcdlock.WithTTL(ttl)).Campaign(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		won := time.Now()
		awaitObserved(t, seen, v, func(ld dlock.Leader) bool { return ld.Value == v })
		return time.Since(won)
	}
	handover("before")
	// Member 0 alone has no leader: its watches are cancelled.
	for _, e := range m[1:] {
		if err := e.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	for _, e := range m[1:] {
		if err := e.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// It watches again a poll at most after its member has a leader.
	time.Sleep(2 * time.Second)
	var took []time.Duration
	for i := range 4 {
		took = append(took, handover(fmt.Sprint("after-", i)))
	}
	t.Logf("measured: leaders named %v after their Campaign returned", took)
	for _, d := range took {
		if d > 500*time.Millisecond {
			t.Errorf("a leader was named %v after its Campaign returned; want at once (by the watch), not at the next poll", d)
		}
	}
}
