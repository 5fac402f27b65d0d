package servers

import "testing"

// BuildEtcd's binary is the version it says, and serves a cluster. make
// deps runs this test first, so that the build (once per machine) is not
// timed inside another package's tests.
func TestIntegrationBuildEtcd(t *testing.T) {
	bin := requireBuiltEtcd(t)
	if v, err := EtcdVersion(bin); err != nil || v != EtcdBuildVersion {
		t.Fatalf("EtcdVersion(%s) = %q, %v; want %q", bin, v, err, EtcdBuildVersion)
	}
	c := startEtcdClusterWith(t, bin, 1)
	if ok, err := c.Members[0].IsLeader(); err != nil || !ok {
		t.Fatalf("IsLeader = %v, %v; a cluster of one leads itself", ok, err)
	}
}
