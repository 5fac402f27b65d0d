package main_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Servers the package's tests share, one deployment of each kind, started
// by the first test that asks for it and stopped by TestMain (StopAll). A
// test that uses one touches only lock names of its own (lockName) and
// leaves the servers as they are: a test that stops, pauses or
// reconfigures its servers, or needs new ones, starts its own.
var (
	sharedRedis1 lazy[*testenv.Redis]
	sharedRedis3 lazy[[]*testenv.Redis]
	sharedZK     lazy[*testenv.ZooKeeper]
	sharedEtcd   lazy[*testenv.Etcd]
	sharedPG     lazy[*testenv.Postgres]
	sharedMaria  lazy[*testenv.MariaDB]
)

// lazy holds a server started on first use.
type lazy[S any] struct {
	mu   sync.Mutex
	done bool
	srv  S
	err  error
}

// get returns the server, launching it first if no test has. It skips t
// under -short, saying that it needs (such as "needs MariaDB"); skips it
// if look reports the server missing, or fails it in CI; and fails it if
// the server did not start.
func (l *lazy[S]) get(t testing.TB, needs string, look func() error, launch func() (S, error)) S {
	t.Helper()
	testenv.SkipIfShort(t, needs)
	if err := look(); err != nil {
		if ci := os.Getenv("CI"); strings.EqualFold(ci, "true") || ci == "1" {
			t.Fatalf("%v (CI is set, so this is a failure)", err)
		}
		t.Skip(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.srv, l.err = launch()
		l.done = true
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.srv
}

// logTailIfFailed logs the tails of the servers' logs at the end of t if
// it failed, as testenv's Start functions do for a test's own servers.
func logTailIfFailed(t testing.TB, servers ...interface{ LogTail(int) string }) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range servers {
				t.Logf("shared server log tail:\n%s", s.LogTail(20))
			}
		}
	})
}

func lookRedis() error { _, err := testenv.LookBinary("redis-server"); return err }

// sharedRedis returns the shared standalone Redis.
func sharedRedis(t testing.TB) *testenv.Redis {
	t.Helper()
	srv := sharedRedis1.get(t, "needs redis-server", lookRedis, func() (*testenv.Redis, error) {
		return testenv.LaunchRedis(testenv.RedisConfig{})
	})
	logTailIfFailed(t, srv)
	return srv
}

// sharedRedlock returns the three shared Redis servers of a Redlock
// deployment.
func sharedRedlock(t testing.TB) []*testenv.Redis {
	t.Helper()
	servers := sharedRedis3.get(t, "needs redis-server", lookRedis, func() ([]*testenv.Redis, error) {
		var servers []*testenv.Redis
		for range 3 {
			s, err := testenv.LaunchRedis(testenv.RedisConfig{})
			if err != nil {
				return nil, err
			}
			servers = append(servers, s)
		}
		return servers, nil
	})
	for _, s := range servers {
		logTailIfFailed(t, s)
	}
	return servers
}

func sharedZooKeeper(t testing.TB) *testenv.ZooKeeper {
	t.Helper()
	srv := sharedZK.get(t, "needs ZooKeeper", testenv.LookZooKeeper, testenv.LaunchZooKeeper)
	logTailIfFailed(t, srv)
	return srv
}

func sharedEtcdServer(t testing.TB) *testenv.Etcd {
	t.Helper()
	srv := sharedEtcd.get(t, "needs an etcd server", func() error { _, err := testenv.LookEtcd(); return err }, testenv.LaunchEtcd)
	logTailIfFailed(t, srv)
	return srv
}

func sharedPostgres(t testing.TB) *testenv.Postgres {
	t.Helper()
	srv := sharedPG.get(t, "needs PostgreSQL", testenv.LookPostgres, testenv.LaunchPostgres)
	logTailIfFailed(t, srv)
	return srv
}

func sharedMariaDB(t testing.TB) *testenv.MariaDB {
	t.Helper()
	srv := sharedMaria.get(t, "needs MariaDB", testenv.LookMariaDB, testenv.LaunchMariaDB)
	logTailIfFailed(t, srv)
	return srv
}
