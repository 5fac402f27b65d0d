package mysqllock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// A mode is one of mysqllock's two kinds of lock, as the tests drive it.
type mode struct {
	name string
	// newLocker returns the lock called key on c.
	newLocker func(c *mysqllock.Client, key string, opts ...mysqllock.Option) dlock.Locker
	// sabotage removes the lock on key behind its holder's back.
	sabotage func(t testing.TB, m *testenv.MariaDB, key string)
	// leftovers describes what a released lock on key has left held.
	leftovers func(t testing.TB, m *testenv.MariaDB, key string) []string
}

var leaseMode = mode{
	name: "lease",
	newLocker: func(c *mysqllock.Client, key string, opts ...mysqllock.Option) dlock.Locker {
		return c.NewMutex(key, opts...)
	},
	sabotage: func(t testing.TB, m *testenv.MariaDB, key string) {
		admin(t, m, "DELETE FROM dlock_leases WHERE name = ?", key)
	},
	leftovers: func(t testing.TB, m *testenv.MariaDB, key string) []string {
		var left []string
		for _, token := range admin(t, m, "SELECT token FROM dlock_leases WHERE name = ? AND token <> ''", key) {
			left = append(left, "row held by token "+token)
		}
		return left
	},
}

var sessionMode = mode{
	name: "session",
	newLocker: func(c *mysqllock.Client, key string, opts ...mysqllock.Option) dlock.Locker {
		return c.NewSessionMutex(key, opts...)
	},
	// The lock is the row and the GET_LOCK lock of the session that holds
	// it: both go.
	sabotage: func(t testing.TB, m *testenv.MariaDB, key string) {
		leaseMode.sabotage(t, m, key)
		who := admin(t, m, "SELECT COALESCE(IS_USED_LOCK(?), 0)", lockName(key))
		if len(who) != 1 || who[0] == "0" {
			t.Fatalf("no session holds the GET_LOCK lock of %q (%v); want 1 to kill", key, who)
		}
		admin(t, m, "KILL CONNECTION "+who[0])
	},
	leftovers: func(t testing.TB, m *testenv.MariaDB, key string) []string {
		left := leaseMode.leftovers(t, m, key)
		for _, who := range admin(t, m, "SELECT IS_USED_LOCK(?)", lockName(key)) {
			if who != "" {
				left = append(left, "GET_LOCK lock held by connection "+who)
			}
		}
		return left
	},
}

var modes = []mode{leaseMode, sessionMode}

// lockName is the GET_LOCK name of the session-mode lock called name on
// the default table.
func lockName(name string) string { return mysqllock.New(nil).NewSessionMutex(name).LockName() }

// lockOptions are the options of the lock that o asks for.
func lockOptions(o dlocktest.Options) []mysqllock.Option {
	opts := []mysqllock.Option{mysqllock.WithTTL(o.TTL), mysqllock.WithMaxHold(o.MaxHold)}
	if o.NoRenewal {
		opts = append(opts, mysqllock.WithoutRenewal())
	}
	return opts
}

// kinds are the kinds of lock mysqllock offers on one name, for
// dlocktest.RunKinds: its two modes and an election, all one lock.
func kinds(m *testenv.MariaDB) []dlocktest.Kind {
	kind := func(name string, make func(c *mysqllock.Client, key string, opts []mysqllock.Option) dlock.Locker) dlocktest.Kind {
		return dlocktest.Kind{Name: name, Lock: dlock.KindMutex, Holders: 1, New: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			return make(newClient(t, m.DSN(), mysqllock.WithObserver(o.Observer)), key, lockOptions(o))
		}}
	}
	return []dlocktest.Kind{
		kind("Mutex", func(c *mysqllock.Client, key string, opts []mysqllock.Option) dlock.Locker {
			return c.NewMutex(key, opts...)
		}),
		kind("SessionMutex", func(c *mysqllock.Client, key string, opts []mysqllock.Option) dlock.Locker {
			return c.NewSessionMutex(key, opts...)
		}),
		kind("Election", func(c *mysqllock.Client, key string, opts []mysqllock.Option) dlock.Locker {
			return dlocktest.Campaigner(c.NewElection(key, opts...))
		}),
	}
}

func backend(m *testenv.MariaDB, md mode) dlocktest.Backend {
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			c := newClient(t, m.DSN(), mysqllock.WithObserver(o.Observer))
			return clients.Add(md.newLocker(c, key, lockOptions(o)...), c.Close)
		},
		Kinds:       kinds(m),
		CloseClient: clients.Close,
		ErrClosed:   mysqllock.ErrClosed,
		Sabotage:    func(t testing.TB, key string) { md.sabotage(t, m, key) },
		Pause: func(t testing.TB, d time.Duration) {
			if err := m.Pause(); err != nil {
				t.Errorf("pause: %v", err)
			}
			time.Sleep(d)
			if err := m.Resume(); err != nil {
				t.Errorf("resume: %v", err)
			}
		},
		RestartEmpty: func(t testing.TB) {
			if err := m.RestartEmpty(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			migrate(t, m.DSN())
		},
		Leftovers: func(t testing.TB, key string) []string { return md.leftovers(t, m, key) },
		Admin:     func(t testing.TB) dlock.Admin { return newClient(t, m.DSN()) },
		Inspect: func(t testing.TB, key string) dlock.Info {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			info, err := newClient(t, m.DSN()).Inspect(ctx, key)
			if err != nil {
				t.Fatalf("Inspect(%q): %v", key, err)
			}
			return info
		},
		Restart: func(t testing.TB) {
			if err := m.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
		},
		Unreachable: func(t testing.TB, key string, o dlocktest.Options) (dlock.Locker, func(refuse bool)) {
			p := testenv.StartProxy(t, m.Addr())
			c := newClient(t, strings.Replace(m.DSN(), m.Addr(), p.Addr(), 1), mysqllock.WithObserver(o.Observer))
			return clients.Add(md.newLocker(c, key, lockOptions(o)...), c.Close), func(refuse bool) {
				if refuse {
					p.SetRefuse(true)
					p.Reset()
					return
				}
				p.Blackhole(true)
			}
		},
		// The attempt timeout of a lock with the fault cases' TTL: see
		// Faults in the package doc.
		TryLockBound: dblease.AttemptTimeout(dlocktest.FaultTTL),
	}
}

func TestIntegrationConformance(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			t.Parallel()
			dlocktest.Run(t, backend(startDB(t), md))
		})
	}
}

// A Mutex, a SessionMutex and an Election of one name are one lock. The
// session mode's Leftovers see both the row and the GET_LOCK lock.
func TestIntegrationKinds(t *testing.T) {
	dlocktest.RunKinds(t, backend(sharedDB(t), sessionMode))
}

func TestIntegrationObserver(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			t.Parallel()
			dlocktest.RunObserver(t, backend(startDB(t), md))
		})
	}
}
