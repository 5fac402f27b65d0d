package zklock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/go-zookeeper/zk"
)

// A Client that logs in with a client certificate and a digest user makes
// lock paths whose ACL names both identities. When its own node is gone
// (an ensemble restarted empty, a session expired) it cannot read the
// ACL ZooKeeper gave that node; it must say the node is gone, not guess
// its identities from the digest user alone and call its own path open to
// the x509 subject (the chaos run zk3/tls failed a Lock with ErrPathACL
// after kill-empty this way).
func TestIntegrationACLCheckWithOwnNodeGone(t *testing.T) {
	certs := testenv.NewCerts(t)
	z := testenv.StartZooKeeperTLS(t, certs, true)
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := New(ctx, []string{z.TLSAddr()}, WithTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}),
		WithDigestAuth("app", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := "/acl-gone"
	if _, err := s.Conn().Create(dir, nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	acl, _, err := s.Conn().GetACL(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ACL of %s: %v", dir, acl)
	err = s.checkACL(ctx, dir, dir+"/gone", nil)
	if !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("checkACL with the Client's own node gone: %v; want zk.ErrNoNode (the caller queues again)", err)
	}
	// With its node there, the path passes.
	if _, err := s.Conn().Create(dir+"/mine", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := s.checkACL(ctx, dir, dir+"/mine", nil); err != nil {
		t.Fatalf("checkACL with the Client's own node there: %v", err)
	}
}
