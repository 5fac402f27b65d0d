package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// A listing is the keys of one lock, oldest first, split into those that
// hold it and those that wait.
type listing struct {
	kind    dlock.Kind
	permits int
	holders []*mvccpb.KeyValue
	waiters int
	detail  string // what was found, for dlock.KindUnknown
	rev     int64  // the store's revision when the keys were listed
}

// list reads every key of the lock called name, without their values,
// in one request, and decides who holds it by the rules the locks
// themselves use.
func (c *Client) list(ctx context.Context, name string) (listing, error) {
	if err := checkName(name); err != nil {
		return listing{}, err
	}
	resp, err := c.cli.Get(ctx, prefix(name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return listing{}, fmt.Errorf("etcdlock: listing %q: %w", name, err)
	}
	l, err := classifyKeys(name, resp.Kvs)
	l.rev = resp.Header.Revision
	return l, err
}

// values reads the keys (with their values) of l's holders as they were when l was listed,
// in one request: the other keys' values, which may be large, are not
// read. If that revision has been compacted since, it reads the current
// values; a holder whose key has gone by then has none.
func (c *Client) values(ctx context.Context, name string, l listing) (map[string]*mvccpb.KeyValue, error) {
	if len(l.holders) == 0 {
		return nil, nil
	}
	out := map[string]*mvccpb.KeyValue{}
	rev := l.rev
	// etcd takes at most 128 operations in one transaction (--max-txn-ops).
	for holders := l.holders; len(holders) > 0; {
		n := min(len(holders), 100)
		ops := make([]clientv3.Op, n)
		for i, kv := range holders[:n] {
			ops[i] = clientv3.OpGet(string(kv.Key), clientv3.WithRev(rev))
		}
		resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrCompacted) && rev != 0 {
			rev = 0
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("etcdlock: inspecting %q: reading its holders: %w", name, err)
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				out[string(kv.Key)] = kv
			}
		}
		holders = holders[n:]
	}
	return out, nil
}

// classifyKeys decides who holds the lock called name whose keys, oldest
// first, are among kvs: the keys under its prefix of another shape (those
// of the lock "name/b", or keys no lock writes) are left out, as the locks
// leave them out (see grant.keys).
func classifyKeys(name string, all []*mvccpb.KeyValue) (listing, error) {
	var kvs []*mvccpb.KeyValue
	for _, kv := range all {
		if k, _ := parseKey(name, string(kv.Key)); k != kindOther {
			kvs = append(kvs, kv)
		}
	}
	if len(kvs) == 0 {
		return listing{kind: dlock.KindFree}, nil
	}
	first, n := parseKey(name, string(kvs[0].Key))
	l := listing{kind: first.lockKind()}
	switch first {
	case kindRead:
		i := 0
		for i < len(kvs) {
			if k, _ := parseKey(name, string(kvs[i].Key)); k != kindRead {
				break
			}
			i++
		}
		l.holders = kvs[:i]
	case kindPermit: // the permits ahead of any other kind's key (or another semaphore's), n at most
		l.permits = n
		i := 0
		for i < min(n, len(kvs)) {
			if k, m := parseKey(name, string(kvs[i].Key)); k != kindPermit || m != n {
				break
			}
			i++
		}
		l.holders = kvs[:i]
	default:
		l.holders = kvs[:1]
	}
	l.waiters = len(kvs) - len(l.holders)
	return l, nil
}

// Inspect reports which kind of lock uses name, which keys hold it and how
// many wait, deciding who holds by the rules the locks themselves use. It
// takes one listing of the name's keys, one read of the holders' values
// (as they were at the listing; the waiters' are not read) and one
// TimeToLive of each holder's etcd lease. Each Holder's Owner is cut to
// 256 bytes and "...": a key that another writer changed may hold a
// large value. Info.TTL is the longest time left on a holder's etcd lease
// (whole seconds, as etcd counts them), Info.Fence the highest holder's
// fence (its key's create revision), and each Holder's Where names its key
// and etcd lease. A holder that is a concurrency.Mutex has Owner "" (it
// writes no token), and an election's leader (NewElection's or a
// concurrency.Election's) has its campaign value, without a Label.
// Inspect writes nothing.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	l, err := c.list(ctx, name)
	if err != nil {
		return dlock.Info{}, err
	}
	info := dlock.Info{Name: name, Kind: l.kind, Waiters: l.waiters, PermitLimit: l.permits, Detail: l.detail}
	values, err := c.values(ctx, name, l)
	if err != nil {
		return dlock.Info{}, err
	}
	for _, kv := range l.holders {
		k, _ := parseKey(name, string(kv.Key))
		value := values[string(kv.Key)]
		if value == nil { // gone since the listing
			value = &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision}
		}
		owner, label := ownerOf(value)
		info.Holders = append(info.Holders, dlock.Holder{
			Owner: cut(owner),
			Label: cut(label),
			Mode:  k.mode(),
			Holds: 1,
			Fence: uint64(kv.CreateRevision),
			Where: fmt.Sprintf("key %s on etcd lease %x", kv.Key, kv.Lease),
		})
		info.Fence = max(info.Fence, uint64(kv.CreateRevision))
		if kv.Lease == 0 {
			continue
		}
		ttl, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return dlock.Info{}, fmt.Errorf("etcdlock: inspecting %q: lease %x: %w", name, kv.Lease, err)
		}
		info.TTL = max(info.TTL, time.Duration(ttl.TTL)*time.Second)
	}
	return info, nil
}

// ForceUnlock is an operator's override: it deletes every key that holds
// the lock called name (a mutex's holder, an RWMutex's readers or writer,
// a semaphore's leases), decided by the rules Inspect reports, and reports
// whether it deleted any. Each deletion is made only if the key is still
// the one listed, so a key that came to hold after the listing is left
// alone. The waiters behind the deleted keys are woken by their watches
// and take the lock in queue order. On a name of Kind dlock.KindUnknown it
// deletes nothing and returns an error saying why.
//
// The holders are not told at once. Each finds its key gone at its next
// renewal, which comes every third of its lease time, and its lease then
// ends with an error matching both dlock.ErrLost and dlock.ErrTakenOver.
// Until then the old holder and the new one may both believe they hold the
// lock: only their fences tell them apart.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	l, err := c.list(ctx, name)
	if err != nil {
		return false, err
	}
	if l.kind == dlock.KindUnknown {
		return false, fmt.Errorf("etcdlock: ForceUnlock %q: %s", name, l.detail)
	}
	deleted := false
	for _, kv := range l.holders {
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return deleted, fmt.Errorf("etcdlock: ForceUnlock %q: deleting %s: %w", name, kv.Key, err)
		}
		deleted = deleted || resp.Succeeded
	}
	return deleted, nil
}

// cut returns s, cut to 256 bytes and "..." if it is longer: what Inspect
// reports of a value that may be large.
func cut(s string) string {
	if len(s) > 256 {
		return s[:256] + "..."
	}
	return s
}
