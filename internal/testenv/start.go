// Package testenv gives tests the real servers of package servers
// (redis-server, ZooKeeper, PostgreSQL, MariaDB, etcd, and the fault
// proxy): its types and Launch functions under the same names, and Start
// functions that take a testing.TB, skip the test under -short or when the
// server is not installed (or fail it when the CI environment variable is
// "true" or "1"), fail it if the server does not start, and close what
// they started when the test ends, logging the server's log tail first if
// the test failed.
//
// Only tests import testenv; the chaos harness, the dlock command and the
// benchmarks use package servers.
package testenv

import (
	"os"
	"strings"
	"testing"
)

// inCI reports whether the CI environment variable asks for missing
// binaries to be treated as failures.
func inCI() bool {
	v := os.Getenv("CI")
	return strings.EqualFold(v, "true") || v == "1"
}

// RequireBinary returns the path of the named executable, found as by
// servers.LookBinary. If it is missing, RequireBinary skips the test, or fails it
// when the CI environment variable is "true" or "1"; either way the
// message names the Debian package to install.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := LookBinary(name)
	require(t, err)
	return path
}

// require skips the test if err, the outcome of looking for a server, is
// not nil, or fails it when the CI environment variable is "true" or "1".
func require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		if inCI() {
			t.Fatalf("%v (CI is set, so this is a failure)", err)
		}
		t.Skipf("%v", err)
	}
}

// NewCerts writes a new CA and the certificates it signs into a temporary
// directory that t removes.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	c, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// StartCluster starts a cluster as LaunchCluster does and closes it when
// the test and its subtests complete. If the test has failed by then, the
// tail of each node's log is written with t.Log. StartCluster skips the
// test if redis-server is not installed (see RequireBinary) and fails it
// if the cluster does not come up.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return StartClusterConfig(t, ClusterConfig{Masters: masters})
}

// StartClusterConfig is LaunchClusterConfig for tests, as StartCluster is
// LaunchCluster.
func StartClusterConfig(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	SkipIfShort(t, "needs a Redis Cluster")
	RequireBinary(t, "redis-server")
	c, err := LaunchClusterConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range c.Nodes {
			r.Resume()
			closeForTest(t, r)
		}
		c.Close()
	})
	return c
}

// startForTest starts a server for test t with launch, and closes it when
// t and its subtests complete, logging the tail of its log first if t has
// failed. It skips t under -short, saying that t needs the server (needs,
// such as "needs MariaDB"), and if look reports that the server is not
// installed (or fails t when the CI environment variable is "true" or
// "1"); and it fails t if the server does not start.
func startForTest[T server](t testing.TB, needs string, look func() error, launch func() (T, error)) T {
	t.Helper()
	SkipIfShort(t, needs)
	require(t, look())
	srv, err := launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeForTest(t, srv) })
	return srv
}

// StartEtcdTLS starts a server as LaunchEtcdTLS does, for the test t, as
// StartEtcd does.
func StartEtcdTLS(t testing.TB, certFile, keyFile string) *Etcd {
	t.Helper()
	return startForTest(t, "needs an etcd server", lookEtcd, func() (*Etcd, error) { return LaunchEtcdTLS(certFile, keyFile) })
}

// StartEtcd starts a standalone server as LaunchEtcd does and closes it
// when the test and its subtests complete. If the test has failed by
// then, the tail of the server's log is written with t.Log. StartEtcd
// skips the test under -short and if etcd is not installed (or fails it
// when the CI environment variable is "true" or "1"), and fails it if the
// server does not start.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return startForTest(t, "needs an etcd server", lookEtcd, LaunchEtcd)
}

// requireEtcd skips the test if etcd is not installed, or fails it when
// the CI environment variable is "true" or "1".
func requireEtcd(t testing.TB) {
	t.Helper()
	require(t, lookEtcd())
}

// RequireBuiltEtcd returns BuildEtcd's binary for test t. It skips t under
// -short; if etcd cannot be built it skips t, or fails it when the CI
// environment variable is "true" or "1".
func RequireBuiltEtcd(t testing.TB) string {
	t.Helper()
	SkipIfShort(t, "needs etcd "+EtcdBuildVersion)
	bin, err := BuildEtcd()
	require(t, err)
	return bin
}

// StartEtcdCluster starts a cluster as LaunchEtcdCluster does and closes
// it when the test and its subtests complete. If the test has failed by
// then, the tails of the members' logs are written with t.Log.
// StartEtcdCluster skips the test under -short and if etcd is not
// installed (or fails it when the CI environment variable is "true" or
// "1"), and fails it if the cluster does not form.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	SkipIfShort(t, "needs an etcd cluster")
	requireEtcd(t)
	return StartEtcdClusterWith(t, "", n)
}

// StartEtcdClusterWith is StartEtcdCluster with the etcd binary bin, such as
// RequireBuiltEtcd's; "" means Debian's.
func StartEtcdClusterWith(t testing.TB, bin string, n int) *EtcdCluster {
	t.Helper()
	SkipIfShort(t, "needs an etcd cluster")
	if bin == "" {
		requireEtcd(t)
	}
	c, err := LaunchEtcdClusterWith(bin, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range c.Members {
			closeForTest(t, e)
		}
	})
	return c
}

// StartMariaDB starts a server as LaunchMariaDB does and closes it when
// the test and its subtests complete. If the test has failed by then, the
// tail of the server's log is written with t.Log. StartMariaDB skips the
// test if MariaDB is not installed (or fails it when the CI environment
// variable is "true" or "1") and fails it if the server does not start.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	return startForTest(t, "needs MariaDB", LookMariaDB, LaunchMariaDB)
}

// StartPostgres starts a cluster as LaunchPostgres does and closes it
// when the test and its subtests complete. If the test has failed by then,
// the tail of the server's log is written with t.Log. StartPostgres skips
// the test if PostgreSQL is not installed (or fails it when the CI
// environment variable is "true" or "1") and fails it if the server does
// not start.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	return startForTest(t, "needs PostgreSQL", LookPostgres, LaunchPostgres)
}

// A server is a Redis, ZooKeeper, Postgres, MariaDB or Etcd, as
// closeForTest sees it.
type server interface {
	String() string // "redis-server 127.0.0.1:6379"
	LogTail(n int) string
	Close() error
}

// closeForTest closes srv at the end of a test, logging its log tail
// first if the test failed.
func closeForTest(t testing.TB, srv server) {
	if t.Failed() {
		t.Logf("%s log tail:\n%s", srv.String(), srv.LogTail(logTailLines))
	}
	if err := srv.Close(); err != nil {
		t.Errorf("closing %s: %v", srv.String(), err)
	}
}

// StartProxy starts a proxy as NewProxy does and closes it when the test
// and its subtests complete.
func StartProxy(t testing.TB, target string) *Proxy {
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

// StartRedis starts a redis-server as LaunchRedis does and closes it when
// the test and its subtests complete. If the test has failed by then, the
// tail of the server's log is written with t.Log. StartRedis skips the test
// if redis-server is not installed (see RequireBinary) and fails it if the
// server does not start.
func StartRedis(t testing.TB, cfg RedisConfig) *Redis {
	t.Helper()
	return startForTest(t, "needs redis-server", lookRedis, func() (*Redis, error) { return LaunchRedis(cfg) })
}

// StartRedisN starts n independent servers with the same configuration,
// as StartRedis does. Each gets its own port and directory; cfg.Port and
// cfg.Dir must therefore be zero when n > 1.
func StartRedisN(t testing.TB, n int, cfg RedisConfig) []*Redis {
	t.Helper()
	if n < 0 {
		t.Fatalf("testenv: StartRedisN: negative count %d", n)
	}
	if n > 1 && (cfg.Port != 0 || cfg.Dir != "") {
		t.Fatalf("testenv: StartRedisN: %d servers cannot share Port %d or Dir %q", n, cfg.Port, cfg.Dir)
	}
	servers := make([]*Redis, n)
	for i := range servers {
		servers[i] = StartRedis(t, cfg)
	}
	return servers
}

// StartSentinel is LaunchSentinel for tests: it fails t on error and closes
// the Sentinel when t ends.
func StartSentinel(t testing.TB, master *Redis, masterName string) *Redis {
	t.Helper()
	return startForTest(t, "needs redis-sentinel", lookRedis, func() (*Redis, error) { return LaunchSentinel(master, masterName) })
}

// StartSentinelConfig is LaunchSentinelConfig for tests: it fails t on
// error and closes the Sentinel when the test ends.
func StartSentinelConfig(t testing.TB, cfg SentinelConfig) *Redis {
	t.Helper()
	return startForTest(t, "needs redis-sentinel", lookRedis, func() (*Redis, error) { return LaunchSentinelConfig(cfg) })
}

// requireZooKeeper skips the test if ZooKeeper is not installed, or fails
// it when the CI environment variable is "true" or "1".
func requireZooKeeper(t testing.TB) {
	t.Helper()
	require(t, LookZooKeeper())
}

// StartZooKeeper starts a standalone server as LaunchZooKeeper does and
// closes it when the test and its subtests complete. If the test has
// failed by then, the tail of the server's log is written with t.Log.
// StartZooKeeper skips the test if ZooKeeper is not installed (or fails it
// when the CI environment variable is "true" or "1") and fails it if the
// server does not start.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	return startForTest(t, "needs ZooKeeper", LookZooKeeper, LaunchZooKeeper)
}

// StartEnsemble starts an ensemble as LaunchEnsemble does and closes it
// when the test and its subtests complete. If the test has failed by then,
// the tails of the servers' logs are written with t.Log. StartEnsemble
// skips the test if ZooKeeper is not installed (or fails it when the CI
// environment variable is "true" or "1") and fails it if the ensemble does
// not form.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	SkipIfShort(t, "needs a ZooKeeper ensemble")
	requireZooKeeper(t)
	e, err := LaunchEnsemble(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, z := range e.Servers {
			closeForTest(t, z)
		}
	})
	return e
}

// StartZooKeeperTLS starts a server as LaunchZooKeeperTLS does, and
// skips, fails and closes it as StartZooKeeper does.
func StartZooKeeperTLS(t testing.TB, certs *Certs, requireClientCert bool) *ZooKeeper {
	t.Helper()
	return startForTest(t, "needs ZooKeeper", LookZooKeeper, func() (*ZooKeeper, error) {
		return LaunchZooKeeperTLS(certs, requireClientCert)
	})
}

// lookEtcd returns nil if etcd is installed, and otherwise LookEtcd's
// error.
func lookEtcd() error {
	_, err := LookEtcd()
	return err
}

// lookRedis returns nil if redis-server is installed, and otherwise
// LookBinary's error.
func lookRedis() error {
	_, err := LookBinary("redis-server")
	return err
}
