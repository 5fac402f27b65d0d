package pglock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// A mode is one of pglock's two kinds of lock, as the tests drive it.
type mode struct {
	name string
	// newLocker returns the lock called key on c.
	newLocker func(c *pglock.Client, key string, opts ...pglock.Option) dlock.Locker
	// sabotage removes the lock on key behind its holder's back.
	sabotage func(t testing.TB, url, key string)
	// leftovers describes what a released lock on key has left held.
	leftovers func(t testing.TB, url, key string) []string
}

var leaseMode = mode{
	name: "lease",
	newLocker: func(c *pglock.Client, key string, opts ...pglock.Option) dlock.Locker {
		return c.NewMutex(key, opts...)
	},
	sabotage: func(t testing.TB, url, key string) {
		admin(t, url, "DELETE FROM dlock_leases WHERE name = $1", key)
	},
	leftovers: func(t testing.TB, url, key string) []string {
		var left []string
		for _, token := range admin(t, url, "SELECT token FROM dlock_leases WHERE name = $1 AND token <> ''", key) {
			left = append(left, "row held by token "+token)
		}
		return left
	},
}

var sessionMode = mode{
	name: "session",
	newLocker: func(c *pglock.Client, key string, opts ...pglock.Option) dlock.Locker {
		return c.NewSessionMutex(key, opts...)
	},
	// The lock is the row and the advisory lock of the session that
	// holds it: both go.
	// In one statement: a renewal that ran between deleting the row and
	// reading pg_locks would find the row gone and let the advisory lock
	// go before it could be counted.
	sabotage: func(t testing.TB, url, key string) {
		q := "WITH gone AS (DELETE FROM dlock_leases WHERE name = $1 RETURNING name) " +
			"SELECT pg_terminate_backend(pid) FROM pg_locks WHERE " + strings.ReplaceAll(advisory, "$1", "$2")
		if n := len(admin(t, url, q, key, advisoryKey(key))); n != 1 {
			t.Fatalf("%d sessions hold or wait for the advisory lock of %q; want 1 to terminate", n, key)
		}
	},
	leftovers: func(t testing.TB, url, key string) []string {
		left := leaseMode.leftovers(t, url, key)
		for _, who := range admin(t, url, "SELECT format('backend %s, granted %s', pid, granted) FROM pg_locks WHERE "+advisory, advisoryKey(key)) {
			left = append(left, "advisory lock: "+who)
		}
		return left
	},
}

var modes = []mode{leaseMode, sessionMode}

// advisory selects the rows of pg_locks for the advisory key $1.
const advisory = "locktype = 'advisory' AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1"

// advisoryKey is the key of the session-mode lock called name on the
// default table.
func advisoryKey(name string) int64 { return pglock.New(nil).NewSessionMutex(name).AdvisoryKey() }

// lockOptions are the options of the lock that o asks for.
func lockOptions(o dlocktest.Options) []pglock.Option {
	opts := []pglock.Option{pglock.WithTTL(o.TTL), pglock.WithMaxHold(o.MaxHold)}
	if o.NoRenewal {
		opts = append(opts, pglock.WithoutRenewal())
	}
	return opts
}

// kinds are the kinds of lock pglock offers on one name, for
// dlocktest.RunKinds: its two modes and an election, all one lock.
func kinds(pg *testenv.Postgres) []dlocktest.Kind {
	kind := func(name string, make func(c *pglock.Client, key string, opts []pglock.Option) dlock.Locker) dlocktest.Kind {
		return dlocktest.Kind{Name: name, Lock: dlock.KindMutex, Holders: 1, New: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			return make(newClient(t, pg.URL(), pglock.WithObserver(o.Observer)), key, lockOptions(o))
		}}
	}
	return []dlocktest.Kind{
		kind("Mutex", func(c *pglock.Client, key string, opts []pglock.Option) dlock.Locker { return c.NewMutex(key, opts...) }),
		kind("SessionMutex", func(c *pglock.Client, key string, opts []pglock.Option) dlock.Locker {
			return c.NewSessionMutex(key, opts...)
		}),
		kind("Election", func(c *pglock.Client, key string, opts []pglock.Option) dlock.Locker {
			return dlocktest.Campaigner(c.NewElection(key, opts...))
		}),
	}
}

func backend(pg *testenv.Postgres, m mode) dlocktest.Backend {
	var clients dlocktest.Closers
	return dlocktest.Backend{
		NewLocker: func(t testing.TB, key string, o dlocktest.Options) dlock.Locker {
			c := newClient(t, pg.URL(), pglock.WithObserver(o.Observer))
			return clients.Add(m.newLocker(c, key, lockOptions(o)...), c.Close)
		},
		Kinds:       kinds(pg),
		CloseClient: clients.Close,
		ErrClosed:   pglock.ErrClosed,
		Sabotage:    func(t testing.TB, key string) { m.sabotage(t, pg.URL(), key) },
		Pause: func(t testing.TB, d time.Duration) {
			if err := pg.Pause(); err != nil {
				t.Errorf("pause: %v", err)
			}
			time.Sleep(d)
			if err := pg.Resume(); err != nil {
				t.Errorf("resume: %v", err)
			}
		},
		RestartEmpty: func(t testing.TB) {
			if err := pg.RestartEmpty(); err != nil {
				t.Fatalf("restart: %v", err)
			}
			migrate(t, pg.URL())
		},
		Leftovers: func(t testing.TB, key string) []string { return m.leftovers(t, pg.URL(), key) },
		Admin:     func(t testing.TB) dlock.Admin { return newClient(t, pg.URL()) },
		Inspect: func(t testing.TB, key string) dlock.Info {
			return inspect(t, newClient(t, pg.URL()), key)
		},
		Restart: func(t testing.TB) {
			if err := pg.Restart(); err != nil {
				t.Fatalf("restart: %v", err)
			}
		},
		Unreachable: func(t testing.TB, key string, o dlocktest.Options) (dlock.Locker, func(refuse bool)) {
			p := testenv.StartProxy(t, pg.Addr())
			c := newClient(t, via(pg, p.Addr(), "unreachable"), pglock.WithObserver(o.Observer))
			// Closed before the pool, whose Close would otherwise wait
			// 15s for pgx's cancel requests through the silent proxy.
			t.Cleanup(func() { p.Close() })
			return clients.Add(m.newLocker(c, key, lockOptions(o)...), c.Close), func(refuse bool) { fail(p, refuse) }
		},
		// The attempt timeout of a lock with the fault cases' TTL: see
		// Faults in the package doc.
		TryLockBound: dblease.AttemptTimeout(dlocktest.FaultTTL),
	}
}

// fail makes p fail as dlocktest.Backend.Unreachable says: silent, or
// refusing new connections and resetting the open ones.
func fail(p *testenv.Proxy, refuse bool) {
	if refuse {
		p.SetRefuse(true)
		p.Reset()
		return
	}
	p.Blackhole(true)
}

func TestIntegrationConformance(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dlocktest.Run(t, backend(startDB(t), m))
		})
	}
}

// A Mutex, a SessionMutex and an Election of one name are one lock. The
// session mode's Leftovers see both the row and the advisory lock.
func TestIntegrationKinds(t *testing.T) {
	dlocktest.RunKinds(t, backend(sharedDB(t), sessionMode))
}

func TestIntegrationObserver(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dlocktest.RunObserver(t, backend(startDB(t), m))
		})
	}
}

// inspect returns what c.Inspect reports for name, failing t on an error.
func inspect(t testing.TB, c *pglock.Client, name string) dlock.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", name, err)
	}
	return info
}
