package etcdlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lockName is the name the conformance suite's key becomes.
func lockName(key string) string { return "dlocktest/" + key }

// lockOptions are the options of the lock that o asks for.
func lockOptions(o dlocktest.Options) []etcdlock.Option {
	opts := []etcdlock.Option{etcdlock.WithTTL(o.TTL), etcdlock.WithMaxHold(o.MaxHold)}
	if o.NoRenewal {
		opts = append(opts, etcdlock.WithoutRenewal())
	}
	return opts
}

// kinds are the kinds of lock etcdlock offers on one name, for
// dlocktest.RunKinds.
func kinds(endpoints []string) []dlocktest.Kind {
	kind := func(name string, lock dlock.Kind, holders int, make func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker) dlocktest.Kind {
		return dlocktest.Kind{Name: name, Lock: lock, Holders: holders, New: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			return make(connect(t, endpoints, etcdlock.WithObserver(o.Observer)), lockName(key), lockOptions(o))
		}}
	}
	return []dlocktest.Kind{
		kind("Mutex", dlock.KindMutex, 1, func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker {
			return c.NewMutex(name, opts...)
		}),
		kind("RWMutex.read", dlock.KindRWMutex, dlocktest.AnyNumber, func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker {
			return c.NewRWMutex(name, opts...).Reader()
		}),
		kind("RWMutex.write", dlock.KindRWMutex, 1, func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker {
			return c.NewRWMutex(name, opts...).Writer()
		}),
		// Three permits, not two: a permit waiting behind one permit and
		// one key of another kind must be one that the count alone lets in
		// (the case Queued), so that only the rule against another kind
		// ahead keeps it out.
		kind("Semaphore(3)", dlock.KindSemaphore, 3, func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker {
			return c.NewSemaphore(name, 3, opts...)
		}),
		kind("Election", dlock.KindMutex, 1, func(c *etcdlock.Client, name string, opts []etcdlock.Option) dlock.Locker {
			return dlocktest.Campaigner(c.NewElection(name, opts...))
		}),
	}
}

func backend(e *testenv.Etcd) dlocktest.Backend {
	endpoints := []string{e.Addr()}
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			c := connect(t, endpoints, etcdlock.WithObserver(o.Observer))
			return clients.Add(c.NewMutex(lockName(key), lockOptions(o)...), c.Close)
		},
		Kinds: kinds(endpoints),
		Enqueue: func(t testing.TB, key string, k dlocktest.Kind) func() {
			return enqueue(t, endpoints, lockName(key), k)
		},
		CloseClient: clients.Close,
		ErrClosed:   etcdlock.ErrClosed,
		Sabotage: func(t testing.TB, key string) {
			cli := dial(t, endpoints...)
			if _, err := cli.Delete(ctxFor(t, 10*time.Second), lockName(key)+"/", clientv3.WithPrefix()); err != nil {
				t.Fatalf("delete: %v", err)
			}
		},
		Pause: func(t testing.TB, d time.Duration) {
			if err := e.Pause(); err != nil {
				t.Errorf("pause: %v", err)
			}
			time.Sleep(d)
			if err := e.Resume(); err != nil {
				t.Errorf("resume: %v", err)
			}
		},
		RestartEmpty: func(t testing.TB) {
			if err := e.RestartEmpty(); err != nil {
				t.Fatalf("restart empty: %v", err)
			}
		},
		Restart: func(t testing.TB) {
			if err := e.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
		},
		Unreachable: func(t testing.TB, key string, o dlocktest.Options) (dlock.Locker, func(refuse bool)) {
			p := testenv.StartProxy(t, e.Addr())
			c := connect(t, []string{p.Addr()}, etcdlock.WithObserver(o.Observer))
			return clients.Add(c.NewMutex(lockName(key), lockOptions(o)...), c.Close), func(refuse bool) { cut(p, refuse) }
		},
		// TryLock's bound for a lock of the fault cases' TTL: the TTL, but
		// at least 2s and at most 5s (see the package doc).
		TryLockBound:          2 * time.Second,
		FencesRestartWithData: true,
		Leftovers: func(t testing.TB, key string) []string {
			return keys(t, dial(t, endpoints...), lockName(key)+"/")
		},
		Inspect: func(t testing.TB, key string) dlock.Info {
			info, err := connect(t, endpoints).Inspect(ctxFor(t, 10*time.Second), lockName(key))
			if err != nil {
				t.Fatalf("Inspect(%q): %v", lockName(key), err)
			}
			return info
		},
		Admin:    func(t testing.TB) dlock.Admin { return connect(t, endpoints) },
		LockName: lockName,
	}
}

func TestIntegrationConformance(t *testing.T) {
	t.Parallel() // on a server of its own, beside the fault tests that mostly wait
	dlocktest.Run(t, backend(testenv.StartEtcd(t)))
}

func TestIntegrationObserver(t *testing.T) {
	dlocktest.RunObserver(t, backend(sharedEtcd(t)))
}

func TestIntegrationKinds(t *testing.T) {
	dlocktest.RunKinds(t, backend(sharedEtcd(t)))
}

// cut makes p fail as dlocktest.Backend.Unreachable says: silent, or
// refusing new connections and resetting the open ones.
func cut(p *testenv.Proxy, refuse bool) {
	if refuse {
		p.SetRefuse(true)
		p.Reset()
		return
	}
	p.Blackhole(true)
}

// enqueue puts under name/ a key of kind k, on an etcd lease of its own, as
// an attempt of k leaves it until it is refused, and returns a function
// that revokes it.
func enqueue(t testing.TB, endpoints []string, name string, k dlocktest.Kind) func() {
	t.Helper()
	dir := map[string]string{"Mutex": "", "Election": "", "RWMutex.read": "read/", "RWMutex.write": "write/", "Semaphore(3)": "permits-3/"}
	d, ok := dir[k.Name]
	if !ok {
		t.Fatalf("enqueue: no key layout for %s", k.Name)
	}
	cli := dial(t, endpoints...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gr, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatalf("enqueue %s: %v", k.Name, err)
	}
	if _, err := cli.Put(ctx, fmt.Sprintf("%s/%s%x", name, d, int64(gr.ID)), "", clientv3.WithLease(gr.ID)); err != nil {
		t.Fatalf("enqueue %s: %v", k.Name, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cli.Revoke(ctx, gr.ID); err != nil {
			t.Errorf("revoking the entry of %s: %v", k.Name, err)
		}
	}
}
