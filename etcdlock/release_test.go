package etcdlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unanswered is a deadline error: what a request whose answer did not
// come within its attempt returns.
var unanswered = context.DeadlineExceeded

// A fault is what lateKV does with the next transaction.
type fault = int32

const (
	none           fault = iota
	lateReply            // it applies on the server, and no answer comes in time
	notSent              // it fails without being sent
	serverDeadline       // it fails as a server that saw its deadline pass answers
)

// lateKV does its fault to the next transaction, as an attempt that times
// out on a loaded machine does.
type lateKV struct {
	clientv3.KV
	next *atomic.Int32
}

func (k lateKV) Txn(ctx context.Context) clientv3.Txn {
	if k.next.CompareAndSwap(notSent, none) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return k.KV.Txn(ctx)
	}
	if k.next.CompareAndSwap(serverDeadline, none) {
		return deadlineTxn{k.KV.Txn(ctx), ctx}
	}
	return lateTxn{k.KV.Txn(context.WithoutCancel(ctx)), k.next}
}

type lateTxn struct {
	clientv3.Txn
	next *atomic.Int32
}

func (t lateTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { return lateTxn{t.Txn.If(cs...), t.next} }
func (t lateTxn) Then(ops ...clientv3.Op) clientv3.Txn { return lateTxn{t.Txn.Then(ops...), t.next} }
func (t lateTxn) Else(ops ...clientv3.Op) clientv3.Txn { return lateTxn{t.Txn.Else(ops...), t.next} }
func (t lateTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil && t.next.CompareAndSwap(lateReply, none) {
		return nil, unanswered
	}
	return resp, err
}

// lateLease does the same for the next revokes (armed of them).
type lateLease struct {
	clientv3.Lease
	armed *atomic.Int32
}

func (l lateLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	resp, err := l.Lease.Revoke(context.WithoutCancel(ctx), id)
	if err == nil && l.armed.Add(-1) >= 0 {
		return nil, unanswered
	}
	return resp, err
}

// A Release whose delete and first revoke reached the server but whose
// answers did not come in time (a loaded machine) finds the etcd lease
// gone at the next revoke: its own revoke did that, and the lease is
// released, not lost (ReleaseDuringRenewal failed so under load).
func TestIntegrationReleaseWithLateAnswers(t *testing.T) {
	e := sharedEtcd(t)
	for _, deleted := range []bool{true, false} {
		name := "delete-not-sent"
		if deleted {
			name = "delete-applied"
		}
		t.Run(name, func(t *testing.T) {
			cli := dial(t, e.Addr())
			var txn, revokesLate atomic.Int32
			cli.KV = lateKV{cli.KV, &txn}
			cli.Lease = lateLease{cli.Lease, &revokesLate}
			c := etcdlock.New(cli)
			t.Cleanup(func() { c.Close() })
			ctx := ctxFor(t, 30*time.Second)
			// A TTL long enough that no renewal runs during the test.
			l, err := c.NewMutex(name, etcdlock.WithTTL(30*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h := l.(*etcdlock.Lease)
			if deleted {
				txn.Store(lateReply)
			} else {
				txn.Store(notSent)
			}
			revokesLate.Store(1)
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release = %v; want nil", err)
			}
			if err := l.Err(); err != dlock.ErrReleased {
				t.Errorf("Err = %v after Release; want ErrReleased", err)
			}
			ttl, err := dial(t, e.Addr()).TimeToLive(ctx, h.LeaseID())
			if err != nil || ttl.TTL != -1 {
				t.Errorf("etcd lease after Release: TTL %v (%v); want revoked (-1)", ttl.TTL, err)
			}
			if ks := keys(t, dial(t, e.Addr()), name+"/"); len(ks) > 0 {
				t.Errorf("keys left after Release: %v", ks)
			}
		})
	}
}

// A Release that finds the etcd lease gone at its first revoke, with no
// revoke of its own before, says it had been lost.
func TestIntegrationReleaseAfterRevokeByAnother(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	var txn atomic.Int32
	cli.KV = lateKV{cli.KV, &txn}
	c := etcdlock.New(cli)
	t.Cleanup(func() { c.Close() })
	ctx := ctxFor(t, 30*time.Second)
	l, err := c.NewMutex("revoked-by-another", etcdlock.WithTTL(30*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, e.Addr()).Revoke(ctx, l.(*etcdlock.Lease).LeaseID()); err != nil {
		t.Fatal(err)
	}
	txn.Store(notSent) // the delete gets no answer; the revoke finds nothing
	err = l.Release(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, etcdlock.ErrLeaseNotFound) {
		t.Errorf("Release = %v; want ErrNotHeld and ErrLeaseNotFound", err)
	}
}

// deadlineTxn waits for its context's deadline and fails with the error
// an etcd 3.4 server sends when it sees the deadline pass first.
type deadlineTxn struct {
	clientv3.Txn
	ctx context.Context
}

func (t deadlineTxn) If(cs ...clientv3.Cmp) clientv3.Txn { return deadlineTxn{t.Txn.If(cs...), t.ctx} }
func (t deadlineTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	return deadlineTxn{t.Txn.Then(ops...), t.ctx}
}
func (t deadlineTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	return deadlineTxn{t.Txn.Else(ops...), t.ctx}
}
func (t deadlineTxn) Commit() (*clientv3.TxnResponse, error) {
	<-t.ctx.Done()
	return nil, status.Error(codes.Unknown, context.DeadlineExceeded.Error())
}

// A queueing attempt whose time ran out is tried again, however the server
// words the failure: an etcd 3.4 server that sees the deadline pass before
// the client does answers "Unknown: context deadline exceeded", and Lock
// failed with it on a loaded machine (ReleaseDuringRenewal).
func TestIntegrationQueueingAfterServerDeadline(t *testing.T) {
	e := sharedEtcd(t)
	cli := dial(t, e.Addr())
	var txn atomic.Int32
	cli.KV = lateKV{cli.KV, &txn}
	c := etcdlock.New(cli)
	t.Cleanup(func() { c.Close() })
	ctx := ctxFor(t, 30*time.Second)
	txn.Store(serverDeadline)
	l, err := c.NewMutex("server-deadline").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after one attempt ran out of time = %v; want the lock", err)
	}
	if txn.Load() != none {
		t.Error("the queueing transaction did not meet the fault")
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}
