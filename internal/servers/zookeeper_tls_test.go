package servers

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"
)

func TestZooKeeperTLSNeedsCerts(t *testing.T) {
	z, err := LaunchZooKeeperTLS(nil, true)
	if err == nil {
		z.Close()
		t.Fatal("LaunchZooKeeperTLS(nil) succeeded")
	}
	if !strings.Contains(err.Error(), "NewCerts") {
		t.Errorf("error %q does not say how to make certificates", err)
	}
}

// The secure client port speaks TLS with the server certificate of the
// certificates given, and requires a client certificate when asked to;
// the plain port stays; Close leaves no process.
func TestIntegrationZooKeeperTLS(t *testing.T) {
	t.Parallel()
	skipIfShort(t, "needs ZooKeeper")
	requireZooKeeper(t)
	certs := newCerts(t)
	z, err := LaunchZooKeeperTLS(certs, true)
	if err != nil {
		t.Fatal(err)
	}
	zkExpectDead(t, func() []*ZooKeeper { return []*ZooKeeper{z} })
	t.Cleanup(func() { closeForTest(t, z) })
	if z.TLSAddr() == "" || z.TLSAddr() == z.Addr() {
		t.Fatalf("TLSAddr %q, Addr %q", z.TLSAddr(), z.Addr())
	}
	if reply, err := z.FourLetter("ruok"); err != nil || reply != "imok" {
		t.Errorf("ruok on the plain port = %q, %v", reply, err)
	}
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	// The server's verdict on the client certificate may come after the
	// client's handshake (TLS 1.3): a ruok exchange sees it.
	ruok := func(cfg *tls.Config) (string, error) {
		c, err := tls.Dial("tcp", z.TLSAddr(), cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ruok")); err != nil {
			return "", err
		}
		buf := make([]byte, 4)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	if got, err := ruok(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}}); got != "imok" {
		t.Errorf("ruok over TLS with a client certificate = %q, %v", got, err)
	}
	if got, err := ruok(&tls.Config{RootCAs: pool}); err == nil {
		t.Errorf("ruok over TLS without a client certificate = %q; want an error", got)
	}
}
