package servers

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"syscall"
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

// A secure client port that another process took between FreePort and the
// server's start is reported as a port in use, so that LaunchZooKeeperTLS
// tries another: the JVM's BindException comes above a stack trace longer
// than the log tail an error shows, which once made the launch fail at
// once (cmd/dlock's TestIntegrationZooKeeperTLS beside a make test).
func TestIntegrationZooKeeperTLSPortTaken(t *testing.T) {
	t.Parallel()
	skipIfShort(t, "needs ZooKeeper")
	requireZooKeeper(t)
	// A socket bound to the port but not listening: the server's bind
	// fails, and a dial to the port is refused rather than answered.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	z, err := newZooKeeper()
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := z.addTLS(&zkTLS{certs: newCerts(t), requireClientCert: true}); err != nil {
		t.Fatal(err)
	}
	z.tlsPort = sa.(*syscall.SockaddrInet4).Port
	if err := z.writeConf(nil); err != nil {
		t.Fatal(err)
	}
	// As launchZooKeeper starts it: the server answers on its plain port
	// before it binds the secure one.
	z.mu.Lock()
	err = z.startLocked()
	if err == nil {
		err = z.waitModeLocked(zkStartTimeout, "standalone")
	}
	if err == nil {
		err = z.waitTLSPortLocked()
	}
	z.mu.Unlock()
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("start with the secure port taken: %v; want an error matching %q", err, errAddrInUse)
	}
}
