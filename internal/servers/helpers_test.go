package servers

import (
	"os"
	"strings"
	"testing"
)

// The tests' own Start functions: what internal/testenv offers other
// packages' tests, which this package's tests cannot import (testenv
// imports servers).

// skipIfShort skips t under -short.
func skipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short: %s", why)
	}
}

// require skips t if err, the outcome of looking for a server, is not
// nil, or fails it when the CI environment variable is "true" or "1".
func require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if v := os.Getenv("CI"); strings.EqualFold(v, "true") || v == "1" {
		t.Fatalf("%v (CI is set, so this is a failure)", err)
	}
	t.Skipf("%v", err)
}

func requireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := LookBinary(name)
	require(t, err)
	return path
}

func requireBuiltEtcd(t testing.TB) string {
	t.Helper()
	skipIfShort(t, "needs etcd "+EtcdBuildVersion)
	bin, err := BuildEtcd()
	require(t, err)
	return bin
}

func newCerts(t testing.TB) *Certs {
	t.Helper()
	c, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start starts a server with launch after look found it installed, and
// closes it when t ends, logging its log tail first if t failed.
func start[T interface {
	String() string
	LogTail(int) string
	Close() error
}](t testing.TB, look func() error, launch func() (T, error)) T {
	t.Helper()
	skipIfShort(t, "needs a server")
	require(t, look())
	srv, err := launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeForTest(t, srv) })
	return srv
}

// closeForTest closes srv, logging its log tail first if t failed.
func closeForTest(t testing.TB, srv interface {
	String() string
	LogTail(int) string
	Close() error
}) {
	if t.Failed() {
		t.Logf("%s log tail:\n%s", srv, srv.LogTail(logTailLines))
	}
	if err := srv.Close(); err != nil {
		t.Errorf("closing %s: %v", srv, err)
	}
}

// startAll is start for a cluster or an ensemble: members are its
// servers, each closed (and its log tail logged) as start does.
func startAll[C interface{ Close() error }, T interface {
	String() string
	LogTail(int) string
	Close() error
}](t testing.TB, look func() error, launch func() (C, error), members func(C) []T) C {
	t.Helper()
	skipIfShort(t, "needs servers")
	require(t, look())
	c, err := launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range members(c) {
			if t.Failed() {
				t.Logf("%s log tail:\n%s", m, m.LogTail(logTailLines))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
	})
	return c
}

func lookRedis() error { _, err := LookBinary("redis-server"); return err }
func lookEtcd() error  { _, err := LookEtcd(); return err }

func startRedis(t testing.TB, cfg RedisConfig) *Redis {
	t.Helper()
	return start(t, lookRedis, func() (*Redis, error) { return LaunchRedis(cfg) })
}

func startRedisN(t testing.TB, n int, cfg RedisConfig) []*Redis {
	t.Helper()
	rs := make([]*Redis, n)
	for i := range rs {
		rs[i] = startRedis(t, cfg)
	}
	return rs
}

func startCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return startClusterConfig(t, ClusterConfig{Masters: masters})
}

func startClusterConfig(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	return startAll(t, lookRedis, func() (*Cluster, error) { return LaunchClusterConfig(cfg) },
		func(c *Cluster) []*Redis {
			for _, r := range c.Nodes {
				r.Resume()
			}
			return c.Nodes
		})
}

func startEtcd(t testing.TB) *Etcd {
	t.Helper()
	return start(t, lookEtcd, LaunchEtcd)
}

func startEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	return startEtcdClusterWith(t, "", n)
}

func startEtcdClusterWith(t testing.TB, bin string, n int) *EtcdCluster {
	t.Helper()
	look := lookEtcd
	if bin != "" {
		look = func() error { return nil }
	}
	return startAll(t, look, func() (*EtcdCluster, error) { return LaunchEtcdClusterWith(bin, n) },
		func(c *EtcdCluster) []*Etcd { return c.Members })
}

func startMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	return start(t, LookMariaDB, LaunchMariaDB)
}

func startPostgres(t testing.TB) *Postgres {
	t.Helper()
	return start(t, LookPostgres, LaunchPostgres)
}

func startZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	return start(t, LookZooKeeper, LaunchZooKeeper)
}

func startEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	return startAll(t, LookZooKeeper, func() (*Ensemble, error) { return LaunchEnsemble(n) },
		func(e *Ensemble) []*ZooKeeper { return e.Servers })
}

func startProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("closing proxy: %v", err)
		}
	})
	return p
}

func requireZooKeeper(t testing.TB) {
	t.Helper()
	require(t, LookZooKeeper())
}
