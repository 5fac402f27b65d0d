package etcdlock_test

import (
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

func backend(e *testenv.Etcd) dlocktest.Backend {
	endpoints := []string{e.Addr()}
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			opts := []etcdlock.Option{etcdlock.WithTTL(o.TTL), etcdlock.WithMaxHold(o.MaxHold)}
			if o.NoRenewal {
				opts = append(opts, etcdlock.WithoutRenewal())
			}
			c := connect(t, endpoints, etcdlock.WithObserver(o.Observer))
			return clients.Add(c.NewMutex(lockName(key), opts...), c.Close)
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
		LockName: lockName,
	}
}

func TestIntegrationConformance(t *testing.T) {
	dlocktest.Run(t, backend(testenv.StartEtcd(t)))
}

func TestIntegrationObserver(t *testing.T) {
	dlocktest.RunObserver(t, backend(sharedEtcd(t)))
}
